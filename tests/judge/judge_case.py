#!/usr/bin/python3
"""`shardproof judge` on PyTorch runs recorded with python/shardproof_torch (docs/judge.md): what it proves.

Cases (CASE --bin shardproof --work DIR):
  digest          the recorder's partial checksums, merged from row and column shards, equal the engine's record
                  of the same tensor bit for bit (`judge --summarize`), special values included
  strategies_a/b  single, ddp, zero1 / tp, tp with a whole embedding and head, pp, dp-tp recorded for 3 steps: PASS,
                  every step's gradient checked and every tensor's update replayed bit for bit
  resume          ddp stopped after step 1, resumed in new processes: PASS with the resume row required
  bugs_a/b/c      every planted bug of examples/torch/train_llama.py (docs/judge.md §2): FAIL at the expected view,
                  step and (where it has one) tensor and ranks, and its pattern line names what the run did
  every_step      the bugs that hid between anchors (a 10x lr step, a skipped micro-batch backward, gradients scaled
                  after recording, at step 1 of 3) FAIL; recorded in the earlier anchored form (anchors every 2)
                  the same runs, and the correct one, are UNVERIFIED (exit 3) naming step 1 — never PASS
  declared        a run that declares its embedding no-decay PASSes (the judge applies the declaration)
  follow          `judge --follow DIR` started before the run: each step judged as it is recorded and its gradients
                  discarded (judge/consumed.jsonl), the verdict when every rank sealed; `judge DIR` again gives the same
                  verdict from judge/steps.jsonl; a 10x lr step at step 2 FAILs there, the replay resynchronized after it
  sensitivity     a recorded gradient scaled by 1 + 4 tolerances FAILs the gradients view there; by 1 + 1/4 passes it
  desync          a rank whose trace misses a collective (resealed): FAIL at collectives naming that rank
  long            every strategy over 24 steps (and ddp resumed at 12): PASS; over 40 steps a 10x lr step and a
                  skipped backward at step 33 FAIL there, and in the anchored form are UNVERIFIED (label long)
The recorder's and the judge's refusals, and the judge's neighbours: judge_inputs.py.
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import judge_support as J  # noqa: E402
import sp_test as T  # noqa: E402

# bug → (strategy, extra args, view, step, tensor or group substring or None, ranks or None, pattern substring)
BUGS = {
    "ddp-bucket-skipped": ("ddp", [], "traffic", 1, "dp[tp0.pp0]", [0, 1], "bytes fewer than the model"),
    "no-sync-last": ("ddp", [], "traffic", 0, "dp[tp0.pp0]", [0, 1], "never ran"),
    "loss-per-microbatch": ("ddp", [], "loss", 0, "loss", [0], "per-micro-batch mean"),
    "loss-scaled": ("ddp", [], "loss", 0, "loss", [0], "the loss scaled by 2"),
    "resume-no-optimizer": ("ddp", ["--resume-at", "1"], "resume", 1, "model.embed_tokens.weight", [0],
                            "optimizer state was not restored"),
    "decay-norms": ("ddp", [], "update", 0, "norm.weight", [0], "decayed, although the declaration lists it"),
    "lr-spike": ("ddp", [], "lr", 1, "lr", [0], "10 × the recorded lr"),
    "skip-backward": ("ddp", [], "gradients", 1, None, None, "without micro-batch 0"),
    "grads-scaled": ("ddp", [], "update", 1, None, None, "recorded gradient × 3"),
    "not-zeroed": ("ddp", [], "gradients", 1, None, None, "not zeroed"),
    "same-data": ("ddp", [], "data", 0, "tokens", [0, 1], "the dp ranks trained the same micro-batches"),
    "nan-grad": ("ddp", [], "gradients", 1, "model.layers.0.input_layernorm.weight", None, "NaN"),
    "schedule-restart": ("ddp", ["--resume-at", "1"], "lr", 1, "lr", [0], "restarted"),
    "tp-norm-unreduced": ("tp", [], "replicas", 0, "model.layers.0.input_layernorm.weight", [0, 1],
                          "partial sum never reduced"),
    "clip-one-tp-rank": ("tp", [], "update", 0, "grad_norm", [0, 1], "norm of its own pieces only"),
    "zero-shard-stale": ("zero1", [], "update", 0, None, None, "did not step"),
    "pp-label-swap": ("pp", [], "loss", 0, "loss", [1], "against other targets"),
    "rope-interleaved": ("single", [], "loss", 0, "loss", [0], "q/k projections' gradients are"),
}


def case_digest(args):
    import numpy as np
    from shardproof_torch import checksum, files
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((48, 60)) * np.exp(rng.uniform(-30, 30, (48, 60)))).astype(np.float32)
    a.flat[:8] = np.array([0.0, -0.0, 1e-45, -3e-42, np.inf, -np.inf, np.nan, 3.4e38], dtype=np.float32)
    b = rng.standard_normal((96, 32)).astype(np.float32)
    c = np.full((7,), 1.0, dtype=np.float32)
    # Wide range without a dominating outlier: values below a chunk's 2^24 window change the rounded sum and l2.
    d = (rng.standard_normal((48, 60)) * np.exp(rng.uniform(-30, 30, (48, 60)))).astype(np.float32)
    tensors = {"a": a, "b": b, "c": c, "d": d}
    path = os.path.join(T.fresh(os.path.join(args.work, "digest"), create=True), "t.safetensors")
    with open(path, "wb") as f:
        f.write(files.safetensors_bytes(list(tensors.items())))
    p = T.run_ok([args.bin, "judge", "--summarize", path])
    engine = {r["tensor"]: r for r in (json.loads(line) for line in p.stdout.splitlines() if line.strip())}
    ok = T.Checks()
    for name, x in tensors.items():
        shape = list(x.shape)
        for shard in ([None] if x.ndim == 1 else [None, (0, 0, 2), (1, 0, 3 if x.shape[1] % 3 == 0 else 4)]):
            parts = 1 if shard is None else shard[2]
            total = checksum.Partial()
            for i in range(parts):
                s = None if shard is None else (shard[0], i, parts)
                piece = x if s is None else np.split(x, parts, axis=s[0])[i]
                flat = np.ascontiguousarray(piece).reshape(-1)
                cut = flat.size // 3  # two ranks covering one piece, as replicas do
                for k0, k1 in ((0, cut), (cut, flat.size)):
                    total.merge(checksum.partial_of(flat[k0:k1], checksum.shard_indices(shape, s, k0)))
            e = engine[name]
            got = {"digest": total.digest(), "count": total.count, "nonfinite": total.nan + total.inf,
                   "absmax": total.absmax(), "sum": total.exact_sum(), "l2": total.exact_l2()}
            for k, v in got.items():
                want = e[k]
                same = (want is None and v != v) or want == v
                ok(same, f"{name} as {shard}: {k} {v!r} from the recorder's partials, the engine's {want!r}")
    # The negative twin: one flipped bit changes the digest.
    a2 = a.copy()
    a2.view(np.uint32)[3, 3] ^= 1
    flipped = checksum.partial_of(a2.reshape(-1), checksum.contiguous_indices(0)).digest()
    ok(flipped != engine["a"]["digest"], "a flipped bit left the digest unchanged")
    return ok.verdict("digest")


def strategies(args, names, steps=3):
    """names: [(label, strategy, extra args)]: each recorded and judged PASS, every view checking every step."""
    ok = T.Checks()
    for label, st, extra in names:
        d = J.record(os.path.join(args.work, f"ok-{label}-{steps}"), st, steps, *extra)
        p = J.judge(args, d)
        if not ok(p.returncode == 0, f"{label}: judge exited {p.returncode}, not 0 (PASS)"):
            T.show(p, 3000)
            continue
        g, rows = J.gate(d), J.rows(d)
        ok(g["verdict"] == "PASS" and g["unverified_steps"] == [], f"{label}: gate.json says {g['verdict']}")
        ok(J.first(d) is None, f"{label}: a first divergence in a correct run: {J.first(d)}")
        grads, upd = rows["gradients"]["measured"], rows["update"]["measured"]
        ok(grads.startswith(f"{steps} of {steps} steps × 21 tensors"), f"{label}: gradients measured '{grads}'")
        ok(f"{steps} of {steps} steps replayed, {21 * steps} tensors, {21 * steps} bitwise" in upd,
           f"{label}: the update is not bit for bit at every tensor of every step: '{upd}'")
        traffic = rows["traffic"]["measured"]
        ok(st == "single" or not traffic.startswith("0 cells"), f"{label}: traffic compared nothing: {traffic}")
        ok("schedule (cosine" in rows["learning"]["measured"], f"{label}: lr row {rows['learning']['measured']}")
        data = J.report_data(d)
        ids = [v["id"] for v in data["views"]]
        ok(data.get("kind") == "judge" and ids == ["gate", "judge", "judge-map", "traffic"] and
           data["views"][0]["data"]["verdict"] == "PASS" and not data["problems"],
           f"{label}: report.html's data: kind {data.get('kind')}, views {ids}, problems {data.get('problems')}")
        for name in ("checksums.jsonl", "steps.jsonl", "summary.md"):
            ok(os.path.exists(J.judged(d, name)), f"{label}: no judge/{name}")
        print(f"{label}: PASS; gradients: {grads}; update: {upd}; traffic: {traffic}")
    return ok


def case_strategies_a(args):
    return strategies(args, [("single", "single", []), ("ddp", "ddp", []), ("zero1", "zero1", [])]).verdict(
        "strategies_a")


def case_strategies_b(args):
    ok = strategies(args, [("tp", "tp", []), ("tp-whole-vocab", "tp", ["--tp-vocab", "whole"]), ("pp", "pp", []),
                           ("dp-tp", "dp-tp", [])])
    whole = J.rows(os.path.join(args.work, "ok-tp-whole-vocab-3"))["traffic"]["measured"]
    ok("embedding whole, head whole" in whole, f"tp with a whole embedding and head: traffic row '{whole}'")
    check_page(args, os.path.join(args.work, "ok-dp-tp-3"), ok, "PASS")
    return ok.verdict("strategies_b")


def check_page(args, d, ok, verdict):
    """judge/report.html drawn by headless Chromium (tests/support/headless.py): no console error, no network
    request, the verdict, one row per view and the map. Skipped, saying so, where there is no Chromium."""
    import headless
    if not os.path.exists(headless.CHROMIUM):
        print(f"report.html not drawn: no {headless.CHROMIUM}")
        return
    with headless.Browser(T.fresh(os.path.join(args.work, "chromium"), create=True)) as b:
        page = b.open("file://" + os.path.abspath(J.judged(d, "report.html")))
        rows = page.eval("document.querySelectorAll('#judge-views tr[data-view]').length")
        cells = page.eval("document.querySelectorAll('#judge-map-gradients td[data-ratio]').length")
        shown = page.eval("document.querySelector('[data-verdict]').getAttribute('data-verdict')")
        ok(page.errors == [] and page.network_requests() == [] and rows == 10 and cells > 0 and shown == verdict,
           f"{d}/judge/report.html: errors {page.errors}, requests {page.network_requests()}, {rows} view rows, "
           f"{cells} map cells, verdict {shown}")
        # The traffic view names the gate's row that compares it, and its outcome; never a red "no prediction"
        # next to a passing row (issue 45).
        red = page.eval("[...document.querySelectorAll('#view-traffic .sp-error')].map(e => e.textContent)")
        said = page.eval("(() => { const e = document.querySelector('#view-traffic [data-prediction-elsewhere]'); "
                         "return e ? e.textContent : null; })()")
        row = next(c for c in J.gate(d)["criteria"] if c["name"].startswith("traffic"))
        ok(not any("no prediction" in t for t in red) and said is not None and
           (": pass" if row["passed"] else ": FAIL") in said and row["name"] in said,
           f"{d}/judge/report.html's traffic view: red {red}, says {said!r}, gate row {row['name']} {row['passed']}")


def case_resume(args):
    ok = T.Checks()
    d = J.record(os.path.join(args.work, "resume-ok"), "ddp", 3, "--resume-at", "1")
    p = J.judge(args, d)
    ok(p.returncode == 0, f"resumed ddp: judge exited {p.returncode}")
    row = J.rows(d)["resume"]
    ok(row["required"] and row["passed"], f"resume row: {row}")
    ok("2 rank resumes" in row["measured"], f"resume row measured '{row['measured']}'")
    ok("the state at steps 0, 1" in J.rows(d)["recording"]["measured"], J.rows(d)["recording"]["measured"])
    return ok.verdict("resume")


def bugs(args, names):
    ok = T.Checks()
    for bug in names:
        st, extra, view, step, tensor, ranks, pattern = BUGS[bug]
        d = J.record(os.path.join(args.work, f"bug-{bug}"), st, 3, "--bug", bug, *extra)
        p = J.judge(args, d)
        if not ok(p.returncode == 1, f"{bug}: judge exited {p.returncode}, not 1 (FAIL)"):
            T.show(p, 3000)
            continue
        f, div = J.first(d), J.divergence(d)
        print(f"{bug}: {div['line']}\n    pattern: {div['pattern']}")
        ok(f["view"] == view and f["step"] == step, f"{bug}: first divergence {f['view']} at step {f['step']}, "
                                                    f"expected {view} at step {step}")
        if tensor:
            ok(tensor in f["tensor"], f"{bug}: names '{f['tensor']}', expected '{tensor}'")
        if ranks is not None:
            ok(f["ranks"] == ranks, f"{bug}: names ranks {f['ranks']}, expected {ranks}")
        ok(pattern in div["pattern"], f"{bug}: pattern '{div['pattern']}', expected '{pattern}'")
        ok(f["steps_failing"] >= 1, f"{bug}: no count of failing steps: {f}")
        if bug == "zero-shard-stale":  # the shard's owner is rank 1 (its moments come from there)
            ok(1 in f["ranks"] and f["tensor"].startswith("model."), f"{bug}: names {f['tensor']} on {f['ranks']}")
    return ok


def case_bugs_a(args):
    return bugs(args, ["ddp-bucket-skipped", "no-sync-last", "loss-per-microbatch", "loss-scaled",
                       "resume-no-optimizer", "decay-norms"]).verdict("bugs_a")


def case_bugs_b(args):
    ok = bugs(args, ["tp-norm-unreduced", "clip-one-tp-rank", "zero-shard-stale", "pp-label-swap",
                     "rope-interleaved"])
    check_page(args, os.path.join(args.work, "bug-tp-norm-unreduced"), ok, "FAIL")
    return ok.verdict("bugs_b")


def case_bugs_c(args):
    return bugs(args, ["lr-spike", "skip-backward", "grads-scaled", "not-zeroed", "same-data", "nan-grad",
                       "schedule-restart"]).verdict("bugs_c")


def unverified(args, ok, label, d, step):
    p = J.judge(args, d)
    g = J.gate(d)
    ok(p.returncode == 3 and g["verdict"] == "UNVERIFIED" and step in g["unverified_steps"],
       f"{label}: exit {p.returncode}, verdict {g['verdict']}, unverified {g['unverified_steps']}: expected "
       f"UNVERIFIED (3) naming step {step}")
    summary = open(J.judged(d, "summary.md")).read()
    ok("**Verdict: UNVERIFIED**" in summary and f"- step {step}: no anchor" in summary,
       f"{label}: summary.md does not list step {step} as not checked")


def case_every_step(args):
    """The bugs of issue 43 that PASSed between anchors: each FAILs now; in the anchored form, UNVERIFIED."""
    ok = T.Checks()
    for bug, view in (("lr-spike", "lr"), ("skip-backward", "gradients"), ("grads-scaled", "update")):
        d = J.record(os.path.join(args.work, f"every-{bug}"), "ddp", 3, "--bug", bug)
        p = J.judge(args, d)
        f = J.first(d)
        ok(p.returncode == 1 and f["view"] == view and f["step"] == 1,
           f"{bug} at step 1: exit {p.returncode}, first divergence {f}")
        a = J.record(os.path.join(args.work, f"anchored-{bug}"), "ddp", 3, "--bug", bug, "--anchor-every", "2")
        unverified(args, ok, f"{bug} at step 1, anchors every 2", a, 1)
    a = J.record(os.path.join(args.work, "anchored-ok"), "ddp", 3, "--anchor-every", "2")
    unverified(args, ok, "a correct run, anchors every 2", a, 1)
    return ok.verdict("every_step")


def case_follow(args):
    import subprocess
    ok = T.Checks()
    for label, extra, code in (("ok", [], 0), ("lr-spike", ["--bug", "lr-spike", "--bug-step", "2"], 1)):
        d = T.fresh(os.path.join(args.work, f"follow-{label}"))
        follower = subprocess.Popen([args.bin, "judge", "--follow", d, "--follow-timeout", "300"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        J.record(d, "ddp", 4, *extra, fresh=False)
        out, err = follower.communicate(timeout=600)
        lines = [x for x in out.splitlines() if x.startswith("step ")]
        ok(follower.returncode == code and len(lines) == 4,
           f"follow {label}: exit {follower.returncode} (expected {code}), {len(lines)} step lines: {err[-500:]}")
        left = [f for _, _, fs in os.walk(os.path.join(d, "grads")) for f in fs]
        consumed = T.read_jsonl(J.judged(d, "consumed.jsonl"))
        ok(left == [] and len(consumed) == 4, f"follow {label}: gradients left {left}, {len(consumed)} consumed")
        ok(J.rows(d)["recording"]["measured"].endswith("(4 judged as they came and discarded)") or
           "4 judged as they came and discarded" in J.rows(d)["recording"]["measured"],
           f"follow {label}: recording row {J.rows(d)['recording']['measured']}")
        again = J.judge(args, d)
        ok(again.returncode == code, f"follow {label}: judged again from judge/steps.jsonl: exit {again.returncode}")
        if label == "lr-spike":
            f = J.first(d)
            ok(f["view"] == "lr" and f["step"] == 2, f"follow lr-spike: first divergence {f}")
            ok("update 21 of 21 tensors bit for bit" in lines[3], f"follow lr-spike: not resynchronized: {lines[3]}")
    p = T.run([args.bin, "judge", "--follow", T.fresh(os.path.join(args.work, "follow-none"), create=True),
               "--follow-timeout", "1"])
    ok(p.returncode == 2 and "no recording started there" in p.stderr, f"follow nothing: {p.returncode} {p.stderr}")
    return ok.verdict("follow")


def case_declared(args):
    """The run judged as it declares itself: an embedding declared no-decay PASSes (the engine's own rule would
    decay it)."""
    ok = T.Checks()
    d = J.record(os.path.join(args.work, "declared-no-decay-embedding"), "ddp", 3, "--no-decay-embedding")
    p = J.judge(args, d)
    ok(p.returncode == 0, f"no-decay embedding: judge exited {p.returncode}: {J.divergence(d)['line']}")
    c = T.read_json(os.path.join(d, "contract.json"))
    ok("model.embed_tokens.weight" in c["optimizer"]["no_decay"], "the example did not declare the embedding")
    return ok.verdict("declared")


def case_sensitivity(args):
    """The gradient view's sharpness: one recorded gradient scaled by 1 + 4 x its derived tolerance (resealed)
    must FAIL the gradients view there, naming the tensor; scaled by 1 + tolerance / 4, that view passes."""
    import numpy as np
    ok = T.Checks()
    base = J.record(os.path.join(args.work, "sense-base"), "single", 1)
    T.run_ok([args.bin, "judge", base])
    # docs/equivalence.md §7, recomputed here: (sqrt(R K) + T) u sqrt(N), R = 19 L + 6, K the longest reduction
    # (the example's model: max(dim 64, 2 ffn 256, seq 16, (H + 2 KV) D 128) = 256), N the step's targets.
    steps = [r for r in T.read_jsonl(os.path.join(base, "records", "rank-00000.jsonl")) if r["kind"] == "step"]
    n = sum(x["targets"] for x in steps[0]["losses"])
    grad_tol = (((19 * 2 + 6) * 256) ** 0.5 + 16) * 2.0 ** -24 * n ** 0.5
    rel = "grads/step-000000/rank-00000.safetensors"
    for factor, fails in ((4.0, True), (0.25, False)):
        d = J.copy_recording(base, os.path.join(args.work, f"sense-{factor}"))
        raw = bytearray(T.read_bytes(os.path.join(d, rel)))
        (hn,) = struct.unpack("<Q", raw[:8])
        entry = json.loads(raw[8:8 + hn])["grad/model.layers.1.mlp.up_proj.weight"]
        b0, b1 = (8 + hn + x for x in entry["data_offsets"])
        g = np.frombuffer(bytes(raw[b0:b1]), dtype=np.float32) * np.float32(1 + factor * grad_tol)
        raw[b0:b1] = g.astype(np.float32).tobytes()
        open(os.path.join(d, rel), "wb").write(bytes(raw))
        J.reseal(d, 0, rel)
        p = J.judge(args, d)
        grads = J.rows(d)["gradients"]
        print(f"x(1 + {factor} tol): judge exit {p.returncode}; {grads['measured']}")
        ok(grads["passed"] != fails, f"scaled by 1 + {factor} x tolerance: gradients row passed = {grads['passed']}")
        if fails:
            f = J.first(d)
            ok(f["view"] == "gradients" and f["tensor"] == "model.layers.1.mlp.up_proj.weight" and f["step"] == 0,
               f"scaled gradient: first divergence {f}")
    return ok.verdict("sensitivity")


def case_desync(args):
    ok = T.Checks()
    d = J.record(os.path.join(args.work, "desync"), "ddp", 2, "--micro-batches", "3", world=3)
    rel = "trace/rank-00002.jsonl"
    lines = open(os.path.join(d, rel)).read().splitlines(keepends=True)
    open(os.path.join(d, rel), "w").write("".join(lines[:-1]))  # rank 2 never issued its last collective
    J.reseal(d, 2, rel)
    p = J.judge(args, d)
    ok(p.returncode == 1, f"desync: judge exited {p.returncode}")
    f = J.first(d)
    print(J.divergence(d)["line"])
    ok(f["view"] == "collectives" and f["ranks"] == [2], f"desync: first divergence {f}")
    return ok.verdict("desync")


def case_long(args):
    ok = strategies(args, [(s, s, []) for s in ("single", "ddp", "zero1", "tp", "pp", "dp-tp")], steps=24)
    d = J.record(os.path.join(args.work, "long-resume"), "ddp", 24, "--resume-at", "12")
    ok(J.judge(args, d).returncode == 0, "ddp resumed at step 12 of 24: not PASS")
    for bug, view in (("lr-spike", "lr"), ("skip-backward", "gradients"), ("grads-scaled", "update")):
        d = J.record(os.path.join(args.work, f"long-{bug}"), "ddp", 40, "--bug", bug, "--bug-step", "33")
        p = J.judge(args, d)
        f = J.first(d)
        ok(p.returncode == 1 and f["view"] == view and f["step"] == 33,
           f"{bug} at step 33 of 40: exit {p.returncode}, first divergence {f}")
        a = J.record(os.path.join(args.work, f"long-anchored-{bug}"), "ddp", 40, "--bug", bug, "--bug-step", "33",
                     "--anchor-every", "2")
        unverified(args, ok, f"{bug} at step 33 of 40, anchors every 2", a, 33)
    return ok.verdict("long")


if __name__ == "__main__":
    sys.exit(J.main(globals(), __doc__))
