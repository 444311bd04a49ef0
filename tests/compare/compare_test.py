"""End-to-end tests of `shardproof compare` and `shardproof bubble` (docs/compare.md).

table:            compare tiny (3 steps) over dp1,dp2,pp2-1f1b,tp2 (≤ 2 ranks each) and check compare.json
                  against expectations that do not come from the table code: the equivalence class of each
                  strategy (parity.py's), traced bytes = predicted bytes per axis, the pipeline's p2p bytes in
                  closed form (2 ends × 2 directions × m × B·T·C·4), the bubble theory (p−1)/(m+p−1), the
                  ledger, then `shardproof bubble` on the pp2 run.
ps_bubble:        compare tiny over ps-w2-s1 (2 workers + 1 server): the parameter-server row carries the timing
                  and bubble columns (its 2 workers form the one pipeline stage, the server has no pipeline
                  place; theory 0), its class is bitwise-equal, its ps traffic is as predicted, and the
                  per-rank bytes show the server moving W = 2 times a worker's.
bad_token:        an unknown token is a usage error (exit 2) naming the token and listing the valid ones,
                  before anything runs.
invalid_topology: tp8 on tiny (4 kv heads) gets an error row naming the rule, dp1 still runs, exit 1.
Usage: compare_test.py CASE --bin shardproof --work DIR
"""
import functools
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402

COMMON = ["--preset", "tiny", "--set", "train.steps=3", "--set", "train.eval_batches=2", "--set", "train.eval_every=0"]
check = T.Checks()


run = functools.partial(T.run, timeout=600)


def case_table(binary, out):
    p = run([binary, "compare", "--strategies", "dp2,pp2-1f1b,tp2", "--out", out] + COMMON)
    print(p.stdout[-6000:])
    print(p.stderr[-3000:])
    check(p.returncode == 0, f"compare exited {p.returncode}, expected 0")
    check(f"report: {out}/report.html" in p.stdout, "compare did not print the report's path")
    for f in ("compare.md", "compare.json", "logs/dp1.log"):
        check(os.path.exists(os.path.join(out, f)), f"{f} missing")
    j = T.read_json(os.path.join(out, "compare.json"))
    rows = {r["label"]: r for r in j["rows"]}
    check([r["label"] for r in j["rows"]] == ["dp1", "dp2", "pp2-1f1b", "tp2"], f"row order {list(rows)}")
    check(j["ok"] is True, "compare.json ok is not true")
    expected = {"dp1": "reference", "dp2": "bitwise-equal", "pp2-1f1b": "bitwise-equal", "tp2": "within-tolerance"}
    for label, cls in expected.items():
        r = rows[label]
        check("error" not in r, f"{label}: error row {r.get('error')}")
        if "error" in r:
            continue
        check(r["equivalence"]["class"] == cls, f"{label}: equivalence {r['equivalence']['class']}, expected {cls}")
        check(r["traffic"]["consistent"], f"{label}: trace not consistent")
        check(r["traffic"]["prediction_found"] and r["traffic"]["traced_equals_predicted"],
              f"{label}: traced != predicted: {r['traffic']['first_problem']}")
        for axis, b in r["traffic"]["bytes_per_step_by_axis"].items():
            check(b["traced"] == b["predicted"], f"{label}: axis {axis} traced {b['traced']} != predicted {b['predicted']}")
        check(r["memory"]["equal"], f"{label}: ledger measured != predicted")
        world = r["dp"] * r["tp"] * r["pp"]
        check(r["world"] == world and len(r["memory"]["ranks"]) == world, f"{label}: world {r['world']}")
        check(r["time"]["step_s_median"] > 0 and r["time"]["steps"] == 3, f"{label}: time {r['time']}")
        check(abs(r["loss"]["final"] - rows["dp1"]["loss"]["final"]) < 1e-4, f"{label}: final loss differs")
        check(r["loss"]["final_eval"] is not None, f"{label}: no eval loss")
        b = r["bubble"]
        check(b is not None and 0.0 <= b["measured"] <= 1.0, f"{label}: bubble {b}")
    check(rows["dp1"]["time"]["ratio_vs_dp1"] == 1.0, "dp1 ratio is not 1")
    if "error" in rows["tp2"]:
        return
    check(rows["tp2"]["equivalence"]["max_rel_loss"] <= 1.52587890625e-05, "tp2 loss outside the tolerance")
    # Pipeline: tiny has B = 2, T = 128, C = 256, global batch 8 → m = 4 micro-batches per step.
    pp = rows["pp2-1f1b"]
    m, btc = 4, 2 * 128 * 256
    check(pp["bubble"]["micro_batches"] == m, f"pp2 m = {pp['bubble']['micro_batches']}")
    check(abs(pp["bubble"]["theory"] - 1.0 / 5.0) < 1e-15, f"pp2 theory {pp['bubble']['theory']} != 1/5")
    check(len(pp["bubble"]["stages"]) == 2, "pp2 has not 2 stages")
    check(pp["traffic"]["bytes_per_step_by_axis"].get("pp", {}).get("traced") == 2 * 2 * m * btc * 4,
          f"pp2 p2p bytes {pp['traffic']['bytes_per_step_by_axis'].get('pp')} != {2 * 2 * m * btc * 4}")
    for label in ("dp1", "dp2", "tp2"):
        check(rows[label]["bubble"]["theory"] == 0.0, f"{label}: bubble theory not 0")
    # `shardproof bubble` on the pipeline run, and on a directory that is not a run.
    bj = os.path.join(out, "bubble.json")
    p = run([binary, "bubble", os.path.join(out, "pp2-1f1b"), "--json", bj])
    print(p.stdout)
    check(p.returncode == 0 and "| 0.200 |" in p.stdout, f"bubble exited {p.returncode}: {p.stdout} {p.stderr}")
    check(len(T.read_json(bj)["rank_steps"]) == 2 * 2, "bubble --json rank_steps: 2 ranks × 2 steps expected")
    p = run([binary, "bubble", os.path.join(out, "logs")])
    check(p.returncode != 0 and "contract.json" in p.stderr, f"bubble on a non-run: {p.returncode} {p.stderr}")


def case_ps_bubble(binary, out):
    p = run([binary, "compare", "--strategies", "ps-w2-s1", "--out", out] + COMMON)
    print(p.stdout[-4000:], p.stderr[-2000:])
    check(p.returncode == 0, f"compare exited {p.returncode}, expected 0")
    rows = {r["label"]: r for r in T.read_json(os.path.join(out, "compare.json"))["rows"]}
    r = rows.get("ps-w2-s1", {})
    check(r.get("ok") and r.get("world") == 3, f"ps row: {r.get('error')} world {r.get('world')}")
    check(r["equivalence"]["class"] == "bitwise-equal", f"ps class {r['equivalence']['class']}")
    b = r.get("bubble")
    check(b is not None, "the parameter-server row has no bubble")
    if b is not None:
        check(b["theory"] == 0.0 and 0.0 <= b["measured"] <= 1.0, f"ps bubble {b}")
        check(len(b["stages"]) == 1 and b["stages"][0]["ranks"] == 2, f"ps bubble stages {b['stages']}")
        check(b["span_ms"] > 0, f"ps pipeline span {b['span_ms']}")
    axis = r["traffic"]["bytes_per_step_by_axis"].get("ps", {})
    check(axis and axis["traced"] == axis["predicted"] > 0, f"ps axis traffic {axis}")
    md = open(os.path.join(out, "compare.md")).read()
    timing = md.split("## Step time", 1)[-1].split("\n## ", 1)[0]
    line = [l for l in timing.splitlines() if l.startswith("| ps-w2-s1 |")]
    check(len(line) == 1 and "| – |" not in line[0], f"the step-time table's ps row has empty cells: {line}")
    busy = [l for l in md.splitlines() if l.startswith("| ps-w2-s1 | 2 (server0)")]
    check(len(busy) == 1 and busy[0].rstrip().endswith("| 2.00 |"), f"bytes per rank: server not 2x a worker: {busy}")


def case_bad_token(binary, out):
    p = run([binary, "compare", "--strategies", "dp2,dp2-foo", "--out", out] + COMMON)
    print(p.stderr)
    check(p.returncode == 2, f"exit {p.returncode}, expected 2")
    check("'foo'" in p.stderr and "dpN" in p.stderr and "interleaved" in p.stderr,
          "the error names the token and lists the valid ones")
    check(not os.path.exists(os.path.join(out, "dp1")), "a run started despite the bad token")
    p = run([binary, "compare", "--strategies", "dp2", "--out", out, "--set", "train.nope=1"])
    check(p.returncode == 2 and "train.nope" in p.stderr, f"bad --set: exit {p.returncode} {p.stderr}")


def case_invalid_topology(binary, out):
    p = run([binary, "compare", "--strategies", "tp8", "--out", out, "--preset", "tiny", "--set", "train.steps=1",
             "--set", "train.eval_batches=1", "--set", "train.eval_every=0"])
    print(p.stdout[-3000:], p.stderr[-2000:])
    check(p.returncode == 1, f"exit {p.returncode}, expected 1")
    j = T.read_json(os.path.join(out, "compare.json"))
    rows = {r["label"]: r for r in j["rows"]}
    check("error" not in rows["dp1"] and rows["dp1"]["ok"], "dp1 did not run")
    check("n_kv_heads" in rows.get("tp8", {}).get("error", ""), f"tp8 row: {rows.get('tp8')}")
    check(not os.path.exists(os.path.join(out, "tp8")), "tp8 ran")
    check("ERROR" in open(os.path.join(out, "compare.md")).read(), "compare.md lacks the error row")


def main():
    a = T.case_args(["table", "ps_bubble", "bad_token", "invalid_topology"])
    out = T.fresh(os.path.join(a.work, a.case))
    os.makedirs(a.work, exist_ok=True)
    {"table": case_table, "ps_bubble": case_ps_bubble, "bad_token": case_bad_token, "invalid_topology": case_invalid_topology}[a.case](a.bin, out)
    return check.verdict(a.case)


if __name__ == "__main__":
    sys.exit(main())
