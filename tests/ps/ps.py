"""The bounded-staleness parameter server (SSP) and the parameter server's bad input (docs/ps.md).

ssp_w3_s2, ssp_w4_s1: a parameter-server run with staleness s under mpirun (W workers + 1 server) and its
single-process replay (`parallel.replay_workers = W`, the same engine code at one rank) must be bitwise
equal (`verify RUN --against REPLAY`); both must be reported divergent-by-design against the single-device
reference, never as a pass (exit 1), and must really differ from it (a run that ignored staleness would
equal the reference and not the replay); metrics.jsonl must record, per step, the version each worker
computed on equal to the fixed schedule recomputed here (v = max(0, t - ((t + w) mod (s + 1)))), a
cumulative staleness histogram equal to those counts, never beyond s and reaching every value 0..s;
the ledger prediction (servers, workers, the replay's caches) equals the measurement and the traces check.
ssp_stale_pull: ps-stale-pull under SSP (a worker keeps its cache where the schedule refreshes it) stops
the run at the injected step naming that worker (beyond the bound); off-schedule it is refused (exit 2).
bad_input: each bad parameter-server configuration under mpirun on 2-3 ranks exits 2 on every rank with
the same message, in seconds (no hang); `prove` refuses an SSP configuration (exit 2, "divergent by design").
Usage: ps.py CASE --bin shardproof --work DIR
"""
import collections
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402

STEPS = 5
COMMON = ["--preset", "tiny", "--set", f"train.steps={STEPS}", "--set", "train.eval_batches=2", "--set",
          "train.eval_every=0", "--quiet"]
M6 = ["train.global_batch=12"]  # 6 micro-batches: 2 per worker for W = 3


def version(t, w, s):
    return max(0, t - (t + w) % (s + 1))


def train(args, name, ranks, overrides, extra=()):
    out = T.fresh(os.path.join(args.work, name))
    p = T.run(T.launch(args.bin, ranks) + ["train", "--out", out] + COMMON + T.sets(overrides) + list(extra),
              timeout=240)
    return out, p


def check_ssp(args, W, s, servers, base):
    check = T.Checks()
    ps_sets = base + ["parallel.architecture=ps", f"parallel.dp={W}", f"parallel.servers={servers}",
                      f"parallel.staleness={s}"]
    tag = f"w{W}_s{s}"
    runs = {}
    for name, ranks, sets in (("ps_" + tag, W + servers, ps_sets),
                              ("replay_" + tag, 1, base + [f"parallel.replay_workers={W}", f"parallel.staleness={s}"]),
                              ("ref_" + tag, 1, base)):
        out, p = train(args, name, ranks, sets)
        if p.returncode != 0:
            T.show(p, 4000)
            T.fail(f"{name}: training exited {p.returncode}")
        runs[name.split("_")[0]] = out
    ps, replay, ref = runs["ps"], runs["replay"], runs["ref"]
    for name in ("ps", "replay"):
        ledger = T.read_json(os.path.join(runs[name], "ledger.json"))
        bad = [(r["rank"], n) for r in ledger["ranks"] for n, v in r["tensors"].items() if not v["equal"]]
        check(ledger["equal"], f"{name}: ledger prediction != measurement on {bad[:5]}")
    t = T.run([args.bin, "trace", "check", ps])
    check(t.returncode == 0, f"trace check failed: {t.stdout[-2000:]} {t.stderr[-2000:]}")
    # The schedule's run equals its one-process replay bit for bit.
    v = T.run([args.bin, "verify", ps, "--against", replay])
    print(v.stdout)
    check(v.returncode == 0 and ": bitwise-equal" in v.stdout, f"ps vs replay: exit {v.returncode}\n{v.stdout}{v.stderr}")
    # Against the single device: divergent by design, never a pass, and really different.
    for name in ("ps", "replay"):
        v = T.run([args.bin, "verify", runs[name], "--against", ref])
        print(v.stdout)
        check(v.returncode == 1 and ": divergent-by-design" in v.stdout,
              f"{name} vs reference: exit {v.returncode}, expected 1 and divergent-by-design\n{v.stdout}{v.stderr}")
        check("promised by the contract: divergent-by-design" in v.stdout, f"{name}: the promise is not shown")
        check("step 0 bitwise-equal" in v.stdout, f"{name}: step 0 (every worker on version 0) is not bitwise")
    losses = {n: [m["loss"] for m in T.read_jsonl(os.path.join(runs[n], "metrics.jsonl")) if m.get("step", -1) >= 0]
              for n in ("ps", "ref")}
    check(losses["ps"][0] == losses["ref"][0], "step 0 loss differs from the reference")
    check(losses["ps"][-1] != losses["ref"][-1], "the stale run ends on the reference's loss: is staleness applied?")
    # The evidence: versions per step, the histogram, the bound.
    for name in ("ps", "replay"):
        steps = [m for m in T.read_jsonl(os.path.join(runs[name], "metrics.jsonl")) if m.get("step", -1) >= 0]
        check(len(steps) == STEPS, f"{name}: {len(steps)} step records")
        counts = collections.Counter()
        for m in steps:
            t = m["step"]
            want = [version(t, w, s) for w in range(W)]
            check(m.get("versions") == want, f"{name} step {t}: versions {m.get('versions')}, schedule {want}")
            check(m.get("staleness") == [t - x for x in want], f"{name} step {t}: staleness {m.get('staleness')}")
            check("diverging_ranks" not in m, f"{name} step {t}: diverging ranks {m.get('diverging_ranks')}")
            counts.update(t - x for x in want)
            hist = {int(k): v for k, v in m.get("staleness_histogram", {}).items()}
            check(hist == dict(counts), f"{name} step {t}: histogram {hist}, expected {dict(counts)}")
        check(max(counts) <= s and set(counts) == set(range(s + 1)),
              f"{name}: staleness values {sorted(counts)}, expected every value 0..{s}")
        print(f"{name}: staleness histogram {dict(sorted(counts.items()))}")
    return check.verdict(args.case)


def check_stale_pull(args):
    check = T.Checks()
    sets = ["parallel.architecture=ps", "parallel.dp=2", "parallel.servers=1", "parallel.staleness=1"]
    # Worker 1 refreshes after steps t with (t + 2) mod 2 = 0: after step 2 it must take the pull.
    out, p = train(args, "stale_pull", 3, sets, ["--fault", "ps-stale-pull@2:1"])
    check(p.returncode != 0, "the run with a worker beyond the staleness bound exited 0")
    check("step 2: worker(s) 1 " in p.stdout + p.stderr and "beyond the staleness bound 1" in p.stdout + p.stderr,
          f"the error does not name step 2, worker 1 and the bound:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    steps = [m for m in T.read_jsonl(os.path.join(out, "metrics.jsonl")) if m.get("step", -1) >= 0]
    flagged = [(m["step"], m["diverging_ranks"]) for m in steps if m.get("diverging_ranks")]
    check(flagged == [(2, [1])], f"replica view: {flagged}, expected [(2, [1])]")
    # Off the schedule (worker 1 keeps its cache after step 1 anyway): refused before running.
    _, p = train(args, "stale_pull_off", 3, sets, ["--fault", "ps-stale-pull@1:1"])
    check(p.returncode == 2 and "refreshes after step 2" in p.stdout + p.stderr,
          f"an off-schedule stale pull: exit {p.returncode}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return check.verdict(args.case)


# (ranks, overrides, text every rank's message must contain)
BAD = {
    "servers_ge_world": (3, ["parallel.architecture=ps", "parallel.dp=2", "parallel.servers=3"],
                         "parallel.servers = 3 ≥ world size 3"),
    "servers_with_tp": (3, ["parallel.architecture=ps", "parallel.tp=2", "parallel.servers=1"],
                        "with tp = 2, pp = 1: a worker is one rank holding a full replica"),
    "servers_with_pp": (3, ["parallel.architecture=ps", "parallel.pp=2", "parallel.servers=1"],
                        "with tp = 1, pp = 2"),
    "staleness_without_ps": (2, ["parallel.dp=2", "parallel.staleness=1"],
                             "parallel.staleness = 1 needs parallel.architecture = \"ps\""),
    "staleness_beyond_steps": (3, ["parallel.architecture=ps", "parallel.dp=2", "parallel.servers=1",
                                   f"parallel.staleness={STEPS}"], f"parallel.staleness = {STEPS} ≥ train.steps"),
    "staleness_free": (3, ["parallel.architecture=ps", "parallel.dp=2", "parallel.servers=1", "parallel.staleness=1",
                           "parallel.staleness_schedule=free"], "the free-running bounded-staleness mode is not built"),
    "staleness_one_worker": (2, ["parallel.architecture=ps", "parallel.dp=1", "parallel.servers=1",
                                 "parallel.staleness=1"], "with one worker"),
    "replay_under_mpirun": (2, ["parallel.dp=2", "parallel.replay_workers=2", "parallel.staleness=1"],
                            "replays a parameter-server run in one process"),
}


def check_bad_input(args):
    check = T.Checks()
    for name, (ranks, overrides, text) in BAD.items():
        out = T.fresh(os.path.join(args.work, "bad_" + name))
        cmd = T.mpirun(ranks) + ["--tag-output", args.bin, "train", "--out", out] + COMMON + T.sets(overrides)
        try:
            p = T.run(cmd, timeout=60)
        except Exception as e:  # subprocess.TimeoutExpired: a hang
            check(False, f"{name}: {e}")
            continue
        check(p.returncode == 2, f"{name}: mpirun exited {p.returncode}, expected 2")
        # --tag-output prefixes each line with [jobid,rank]<stream>:
        by_rank = collections.defaultdict(list)
        for line in (p.stdout + p.stderr).splitlines():
            m = re.match(r"\[\d+,(\d+)\]<std(?:out|err)>:(.*)", line)
            if m:  # each rank prefixes its own lines with "[rN] " (core/log.h): the rest must agree
                by_rank[int(m.group(1))].append(re.sub(r"^\[r\d+\] ", "", m.group(2)))
        texts = {r: "\n".join(by_rank[r]) for r in range(ranks)}
        check(all(text in texts[r] for r in range(ranks)),
              f"{name}: not every rank says '{text}':\n{p.stdout[-3000:]}{p.stderr[-3000:]}")
        check(len(set(texts.values())) == 1, f"{name}: the ranks' messages differ: {texts}")
        check(not os.path.exists(os.path.join(out, "checksums.jsonl")), f"{name}: a refused run wrote evidence")
        print(f"{name}: exit {p.returncode} on {ranks} ranks, every rank: {text}")
    # prove refuses an SSP configuration before launching anything.
    out = T.fresh(os.path.join(args.work, "bad_prove_ssp"))
    p = T.run([args.bin, "prove", "--out", out, "--preset", "tiny", "--quiet"] +
              T.sets(["parallel.architecture=ps", "parallel.dp=2", "parallel.servers=1", "parallel.staleness=1"]),
              timeout=60)
    check(p.returncode == 2 and "divergent by design" in p.stdout + p.stderr,
          f"prove of an SSP run: exit {p.returncode}\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return check.verdict(args.case)


def main():
    args = T.case_args(["ssp_w3_s2", "ssp_w4_s1", "ssp_stale_pull", "bad_input"])
    if args.case == "ssp_w3_s2":
        return check_ssp(args, 3, 2, 1, M6)
    if args.case == "ssp_w4_s1":
        return check_ssp(args, 4, 1, 1, [])
    if args.case == "ssp_stale_pull":
        return check_stale_pull(args)
    return check_bad_input(args)


if __name__ == "__main__":
    sys.exit(main())
