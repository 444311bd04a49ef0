"""Parity tests: every parallel strategy against the single-device reference on one contract.

Each case trains the tiny preset (5 steps) under mpirun with the case's --set overrides and requires:
  * `shardproof verify RUN --against REF` gives the expected equivalence class (bitwise for DP,
    ZeRO-1/2/3 and PP in deterministic mode; within tolerance for TP and fast-mode reductions);
  * ledger.json: predicted bytes == measured bytes on every rank;
  * `shardproof trace check RUN`: every group issued the same collective sequence.
The reference is produced once by the `ref` case (a CTest fixture).
Usage: parity.py CASE --bin shardproof --work DIR
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402

COMMON = ["--preset", "tiny", "--set", "train.steps=5", "--set", "train.eval_batches=2", "--set", "train.eval_every=0",
          "--quiet"]

PS = ["parallel.architecture=ps"]
SP = ["parallel.sequence_parallel=true"]
M6 = ["train.global_batch=12"]
# Mixed precision (docs/equivalence.md §5): bf16 with fp32 gradients (Megatron's default) against its own
# single-device bf16 reference, and bf16 with 16-bit gradients (ZeRO's accounting) against another.
BF = ["train.precision=bf16"]
BG = BF + ["train.grad_dtype=bf16"]
# fp16 with DeepSpeed's dynamic loss scaling (docs/loss_scaling.md); "fp16o": a scale of 2^26 overflows
# the fp16 backward (measured: steps 0-2 overflow, 3-4 are clean at 2^23, step 5 overflows again), so
# those steps are skipped with the scale halved each time (hysteresis 1) and training goes on from there,
# bitwise the same on every topology.
F16 = ["train.precision=fp16", "fp16.initial_scale_power=16"]
F16O = ["train.precision=fp16", "fp16.initial_scale_power=26", "fp16.hysteresis=1", "train.steps=8"]
SEL = ["train.recompute=selective"]
# The fp32 products on each backend pinned (train.gemm32, docs/kernels.md §"The fp32 GEMM"): `ref` and the cases
# above run the host's pick ("auto"), which may be either; g32_* pin oneDNN's sgemm and o32_* OpenBLAS's, each against
# its own pinned reference, so that both backends' equalities are proven on every host whatever it picks.
G32 = ["train.gemm32=onednn"]
O32 = ["train.gemm32=openblas"]
ZB = ["parallel.schedule=zb-h1"]

# name: (ranks, overrides, expected class)
CASES = {
    "ref": (1, [], "bitwise-equal"),
    "dp2": (2, ["parallel.dp=2"], "bitwise-equal"),
    "dp4": (4, ["parallel.dp=4"], "bitwise-equal"),
    "zero1_dp2": (2, ["parallel.dp=2", "parallel.zero=1"], "bitwise-equal"),
    "zero2_dp2": (2, ["parallel.dp=2", "parallel.zero=2"], "bitwise-equal"),
    "zero3_dp2": (2, ["parallel.dp=2", "parallel.zero=3"], "bitwise-equal"),
    "zero1_dp4": (4, ["parallel.dp=4", "parallel.zero=1"], "bitwise-equal"),
    "zero2_dp4": (4, ["parallel.dp=4", "parallel.zero=2"], "bitwise-equal"),
    "zero3_dp4": (4, ["parallel.dp=4", "parallel.zero=3", "train.eval_batches=4"], "bitwise-equal"),
    "fast_dp2": (2, ["parallel.dp=2", "parallel.reduction=fast"], "within-tolerance|bitwise-equal"),
    "fast_dp4": (4, ["parallel.dp=4", "parallel.reduction=fast"], "within-tolerance|bitwise-equal"),
    "recompute_dp2": (2, ["parallel.dp=2", "train.recompute=full"], "bitwise-equal"),
    "pp2_gpipe": (2, ["parallel.pp=2", "parallel.schedule=gpipe"], "bitwise-equal"),
    "pp2_1f1b": (2, ["parallel.pp=2", "parallel.schedule=1f1b"], "bitwise-equal"),
    "pp4_1f1b": (4, ["parallel.pp=4", "parallel.schedule=1f1b"], "bitwise-equal"),
    "pp4_gpipe": (4, ["parallel.pp=4", "parallel.schedule=gpipe"], "bitwise-equal"),
    "pp2_interleaved": (2, ["parallel.pp=2", "parallel.schedule=interleaved", "parallel.virtual_stages=2"],
                        "bitwise-equal"),
    "pp2_1f1b_recompute": (2, ["parallel.pp=2", "train.recompute=full"], "bitwise-equal"),
    "tp2": (2, ["parallel.tp=2"], "within-tolerance"),
    "tp4": (4, ["parallel.tp=4"], "within-tolerance"),
    "tp2_pp2": (4, ["parallel.tp=2", "parallel.pp=2"], "within-tolerance"),
    # Megatron sequence parallelism (docs/equivalence.md §3, "Sequence parallelism"): the TP tolerance class.
    "sp_tp2": (2, SP + ["parallel.tp=2"], "within-tolerance"),
    "sp_tp2_pp2": (4, SP + ["parallel.tp=2", "parallel.pp=2"], "within-tolerance"),
    "dp2_tp2": (4, ["parallel.dp=2", "parallel.tp=2", "parallel.zero=1"], "within-tolerance"),
    "dp2_pp2": (4, ["parallel.dp=2", "parallel.pp=2", "parallel.zero=1"], "bitwise-equal"),
    "dp2_tp2_zero3": (4, ["parallel.dp=2", "parallel.tp=2", "parallel.zero=3"], "within-tolerance"),
    "dp2_tp2_pp2": (8, ["parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "parallel.zero=1"], "within-tolerance"),
    # Parameter server, synchronous (docs/ps.md): W workers + S servers, bitwise the single device's.
    "ps_w1_s1": (2, PS + ["parallel.dp=1", "parallel.servers=1"], "bitwise-equal"),
    "ps_w2_s1": (3, PS + ["parallel.dp=2", "parallel.servers=1"], "bitwise-equal"),
    "ps_w4_s1": (5, PS + ["parallel.dp=4", "parallel.servers=1"], "bitwise-equal"),
    "ps_w2_s2": (4, PS + ["parallel.dp=2", "parallel.servers=2"], "bitwise-equal"),
    "ps_w4_s2": (6, PS + ["parallel.dp=4", "parallel.servers=2"], "bitwise-equal"),
    # Three workers need M divisible by 3: 6 micro-batches (global batch 12), against its own reference.
    "ref_m6": (1, M6, "bitwise-equal"),
    "ps_w3_s1": (4, M6 + PS + ["parallel.dp=3", "parallel.servers=1"], "bitwise-equal"),
    "ps_w3_s2": (5, M6 + PS + ["parallel.dp=3", "parallel.servers=2"], "bitwise-equal"),
    "ref_bf16": (1, BF, "bitwise-equal"),
    "bf16_dp2": (2, BF + ["parallel.dp=2"], "bitwise-equal"),
    "bf16_zero1_dp4": (4, BF + ["parallel.dp=4", "parallel.zero=1"], "bitwise-equal"),
    "bf16_zero2_dp2": (2, BF + ["parallel.dp=2", "parallel.zero=2"], "bitwise-equal"),
    "bf16_zero3_dp2": (2, BF + ["parallel.dp=2", "parallel.zero=3"], "bitwise-equal"),
    "bf16_pp2_1f1b": (2, BF + ["parallel.pp=2"], "bitwise-equal"),
    "bf16_dp2_pp2": (4, BF + ["parallel.dp=2", "parallel.pp=2", "parallel.zero=1"], "bitwise-equal"),
    "bf16_tp2": (2, BF + ["parallel.tp=2"], "within-tolerance"),
    # bf16 compute with fp32 gradients in fast mode: the second micro-batch of a rank adds into the running sum,
    # which the 16-bit block products must not overwrite (GradSink::leaf_is_zero false there).
    "bf16_fast_dp2": (2, BF + ["parallel.dp=2", "parallel.reduction=fast"], "within-tolerance|bitwise-equal"),
    "bf16_sp_tp2": (2, BF + SP + ["parallel.tp=2"], "within-tolerance"),
    "ref_bf16g": (1, BG, "bitwise-equal"),
    "bf16g_dp2": (2, BG + ["parallel.dp=2"], "bitwise-equal"),
    "bf16g_zero2_dp4": (4, BG + ["parallel.dp=4", "parallel.zero=2"], "bitwise-equal"),
    "bf16g_zero3_dp2": (2, BG + ["parallel.dp=2", "parallel.zero=3"], "bitwise-equal"),
    "bf16g_pp2_gpipe": (2, BG + ["parallel.pp=2", "parallel.schedule=gpipe"], "bitwise-equal"),
    "ref_fp16": (1, F16, "bitwise-equal"),
    "fp16_zero1_dp2": (2, F16 + ["parallel.dp=2", "parallel.zero=1"], "bitwise-equal"),
    "fp16_zero3_dp2": (2, F16 + ["parallel.dp=2", "parallel.zero=3"], "bitwise-equal"),
    "fp16_pp2_1f1b": (2, F16 + ["parallel.pp=2"], "bitwise-equal"),
    "ref_fp16o": (1, F16O, "bitwise-equal"),
    "fp16o_dp2": (2, F16O + ["parallel.dp=2"], "bitwise-equal"),
    # Selective recomputation (docs/memory.md §"Recomputation"): the probabilities rebuilt in backward are the
    # forward's bits, so each run is bitwise equal to the same topology without recomputation: the bitwise
    # strategies against `ref` (dp = 1, no recomputation), tp2 against `tp2`, bf16 tp2 against `bf16_tp2`
    # (the stage itself at dp = 1, fp32 and 16-bit: tests/unit/model_stage*_test.cc). Two ranks each.
    "sel_dp2_zero3": (2, SEL + ["parallel.dp=2", "parallel.zero=3"], "bitwise-equal"),
    "sel_pp2_1f1b": (2, SEL + ["parallel.pp=2"], "bitwise-equal"),
    "sel_tp2": (2, SEL + ["parallel.tp=2"], "bitwise-equal"),
    "bf16_sel_tp2": (2, BF + SEL + ["parallel.tp=2"], "bitwise-equal"),
    # ZB-H1 (plan/schedule.h): the backward split into B and W, W deferred; bitwise equal to dp = 1 (verify) and,
    # every checksum record, to 1F1B on the same pipeline (ALSO_BITWISE). m = 4: every rank r defers r W passes.
    "zb_pp2": (2, ZB + ["parallel.pp=2"], "bitwise-equal"),
    "zb_pp4": (4, ZB + ["parallel.pp=4"], "bitwise-equal"),
    "bf16_zb_pp2": (2, BF + ZB + ["parallel.pp=2"], "bitwise-equal"),
    # DP sync overlapped with the backward (parallel.overlap_buckets, default 1; docs/performance.md): the
    # blocking sync (0) and deeper overlaps are bitwise the default's run on every checksum record
    # (ALSO_BITWISE) and dp = 1's; the fast mode within its tolerance; the ledger exact in each.
    "ovl0_dp2": (2, ["parallel.dp=2", "parallel.overlap_buckets=0"], "bitwise-equal"),
    "ovl3_zero2_dp4": (4, ["parallel.dp=4", "parallel.zero=2", "parallel.overlap_buckets=3"], "bitwise-equal"),
    "ovl2_zero3_dp2": (2, ["parallel.dp=2", "parallel.zero=3", "parallel.overlap_buckets=2"], "bitwise-equal"),
    "ovl2_fast_dp4": (4, ["parallel.dp=4", "parallel.reduction=fast", "parallel.overlap_buckets=2"],
                      "within-tolerance|bitwise-equal"),
    "ovl2_dp2_pp2": (4, ["parallel.dp=2", "parallel.pp=2", "parallel.zero=1", "parallel.overlap_buckets=2"],
                     "bitwise-equal"),
    "bf16g_ovl2_zero2_dp4": (4, BG + ["parallel.dp=4", "parallel.zero=2", "parallel.overlap_buckets=2"],
                             "bitwise-equal"),
    "ref_g32": (1, G32, "bitwise-equal"),
    "g32_zero3_dp2": (2, G32 + ["parallel.dp=2", "parallel.zero=3"], "bitwise-equal"),
    "g32_dp2_pp2": (4, G32 + ["parallel.dp=2", "parallel.pp=2", "parallel.zero=1"], "bitwise-equal"),
    "g32_tp2": (2, G32 + ["parallel.tp=2"], "within-tolerance"),
    "ref_o32": (1, O32, "bitwise-equal"),
    "o32_zero3_dp2": (2, O32 + ["parallel.dp=2", "parallel.zero=3"], "bitwise-equal"),
    "o32_dp2_pp2": (4, O32 + ["parallel.dp=2", "parallel.pp=2", "parallel.zero=1"], "bitwise-equal"),
    "o32_tp2": (2, O32 + ["parallel.tp=2"], "within-tolerance"),
}
# The reference each case is compared with (default: "ref").
REFERENCE = {"ps_w3_s1": "ref_m6", "ps_w3_s2": "ref_m6"}
REFERENCE.update({c: "ref_bf16" for c in CASES if c.startswith("bf16_")})
REFERENCE.update({c: "ref_bf16g" for c in CASES if c.startswith("bf16g_")})
REFERENCE.update({c: "ref_fp16" for c in CASES if c.startswith("fp16_")})
REFERENCE.update({c: "ref_fp16o" for c in CASES if c.startswith("fp16o_")})
REFERENCE.update({c: "ref_g32" for c in CASES if c.startswith("g32_")})
REFERENCE.update({c: "ref_o32" for c in CASES if c.startswith("o32_")})
REFERENCE.update({"sel_tp2": "tp2", "bf16_sel_tp2": "bf16_tp2"})
# Cases whose every checksum record must also equal another case's (same topology, another schedule).
ALSO_BITWISE = {"zb_pp2": "pp2_1f1b", "zb_pp4": "pp4_1f1b", "bf16_zb_pp2": "bf16_pp2_1f1b",
                "ovl0_dp2": "dp2", "ovl3_zero2_dp4": "zero2_dp4", "ovl2_zero3_dp2": "zero3_dp2",
                "ovl2_dp2_pp2": "dp2_pp2", "bf16g_ovl2_zero2_dp4": "bf16g_zero2_dp4"}


def check_sync_timeline(check, out, overrides):
    """timeline/rank-00000.jsonl of a dp > 1 run: every step records one grad_sync interval per unit this rank
    holds, each with its unit. With overlap (the default, overlap_buckets ≥ 1) the first sync of a step starts
    before that step's last backward interval ends: it was posted while the backward went on."""
    if not any(o.startswith("parallel.dp=") and o != "parallel.dp=1" for o in overrides):
        return
    overlap = next((int(o.split("=")[1]) for o in overrides if o.startswith("parallel.overlap_buckets=")), 1)
    rows = T.read_jsonl(os.path.join(out, "timeline", "rank-00000.jsonl"))
    steps = sorted({r["step"] for r in rows if "kind" in r})
    for s in steps:
        syncs = [r for r in rows if r.get("step") == s and r.get("kind") == "grad_sync"]
        back = [r for r in rows if r.get("step") == s and r.get("kind", "").startswith("backward")]
        check(syncs and all("unit" in r for r in syncs), f"step {s}: no grad_sync interval with its unit")
        check(len({r["unit"] for r in syncs}) == len(syncs), f"step {s}: a unit synchronized twice")
        if overlap > 0 and syncs and back:
            first, last = min(r["t0_us"] for r in syncs), max(r["t1_us"] for r in back)
            check(first < last, f"step {s}: the first sync starts at {first} µs, after the backward ({last} µs)")
    print(f"timeline: grad_sync intervals in {len(steps)} steps (overlap_buckets {overlap})")


def check_loss_scaling(check, out, overflow):
    """metrics.jsonl of an fp16 run: every step names its loss scale; a skipped step is exactly an overflow
    (finite false) and the next step runs at half its scale (hysteresis 1); a clean step keeps the scale
    (window 1000 > steps). With `overflow` the first step must overflow and a later one must be clean."""
    steps = [r for r in T.read_jsonl(os.path.join(out, "metrics.jsonl")) if r.get("step", -1) >= 0]
    check(all("loss_scale" in r for r in steps), "an fp16 step without loss_scale in metrics.jsonl")
    for a, b in zip(steps, steps[1:]):
        check(a["skipped"] == (not a["finite"]), f"step {a['step']}: skipped {a['skipped']} but finite {a['finite']}")
        want = a["loss_scale"] / 2 if a["skipped"] else a["loss_scale"]
        check(b["loss_scale"] == want, f"step {b['step']}: loss scale {b['loss_scale']}, expected {want}")
    if overflow:
        check(steps[0]["skipped"] and steps[0]["loss_scale"] == 2.0 ** 26, f"step 0 did not overflow: {steps[0]}")
        check(not steps[-1]["skipped"] and steps[-1]["loss"] < steps[0]["loss"], f"no recovery: {steps[-1]}")
        print("loss scale per step:", [(r["step"], r["loss_scale"], r["skipped"]) for r in steps])


def checksum_records(d):
    return [(r["step"], r["phase"], r["tensor"], r.get("digest", r.get("bits")))
            for r in T.read_jsonl(os.path.join(d, "checksums.jsonl"))]


def contract_backend(d):
    """(config.train.gemm32, engine.gemm32) of a run's contract: the backend it resolved to and what ran."""
    c = T.read_json(os.path.join(d, "contract.json"))
    return c["config"]["train"].get("gemm32"), c["engine"].get("gemm32", "")


def check_pinned_backend(check, args, out):
    """A run pinned to one fp32 backend (g32_*, o32_*) names it in its contract. The two pinned references
    differ (another summation order: were the key ignored, both would be one backend), and the host's pick
    (`ref`, train.gemm32 = "auto") is exactly one of them: its contract names the backend it resolved to and
    every record equals that pinned reference's, and none of the other's."""
    want = "onednn" if "g32" in args.case else "openblas"
    key, engine = contract_backend(out)
    check(key == want and engine.startswith(want + "-"), f"contract train.gemm32 = {key}, engine.gemm32 = {engine}")
    if not args.case.startswith("ref_"):
        return
    auto = os.path.join(args.work, "ref")
    if args.case == "ref_o32":  # it runs after ref_g32 (its fixture) and checks the pair
        got, theirs = checksum_records(out), checksum_records(os.path.join(args.work, "ref_g32"))
        differ = sum(g != w for g, w in zip(got, theirs))
        check(differ > 0, f"all {len(theirs)} checksum records of both pinned backends are equal: the key did nothing")
        print(f"{differ} of {len(theirs)} checksum records differ between the pinned backends")
    picked, picked_engine = contract_backend(auto)
    check(picked in ("openblas", "onednn") and picked_engine.startswith(picked + "-"),
          f"`ref` (auto) contract: train.gemm32 = {picked}, engine.gemm32 = {picked_engine}")
    same = checksum_records(auto) == checksum_records(out)
    check(same == (picked == want), f"`ref` picked {picked}: its records {'equal' if same else 'differ from'} the "
          f"{want}-pinned reference's")
    print(f"`ref` resolved train.gemm32 = \"auto\" to {picked} ({picked_engine}); "
          f"{'equal to' if same else 'differs from'} this {want} reference record for record")


def check_every_record_bitwise(check, out, ref):
    """checksums.jsonl of a selective-recompute run against its reference: every record (loss bits, every
    tensor's digest at every step and phase) identical. verify grades a tp run against a tp run on step 0 only
    (later steps drift freely under TP); recomputation must not change a single bit at any step."""
    got, want = checksum_records(out), checksum_records(ref)
    diff = [g for g, w in zip(got, want) if g != w]
    check(len(got) == len(want) and not diff, f"{len(diff)} of {len(want)} records differ, first {diff[:1]}")
    if not diff:
        print(f"{len(got)} of {len(want)} checksum records bitwise equal to {os.path.basename(ref)}")


# Cases run twice: the second run must be bitwise equal to the first (determinism run to run).
REPEAT = {"sp_tp2", "ref_g32", "ref_o32"}


def main():
    args = T.case_args(sorted(CASES))
    ranks, overrides, expected = CASES[args.case]
    out = T.fresh(os.path.join(args.work, args.case))
    ref = os.path.join(args.work, REFERENCE.get(args.case, "ref"))
    p = T.run(T.launch(args.bin, ranks) + ["train", "--out", out] + COMMON + T.sets(overrides))
    if p.returncode != 0:
        T.show(p)
        T.fail(f"training exited {p.returncode}")
    check = T.Checks()
    if "fp16" in args.case:
        check_loss_scaling(check, out, "fp16o" in args.case)
    ledger = T.read_json(os.path.join(out, "ledger.json"))
    bad = [(r["rank"], n) for r in ledger["ranks"] for n, v in r["tensors"].items() if not v["equal"]]
    check(ledger["equal"], f"ledger prediction != measurement on {bad[:5]}")
    t = T.run([args.bin, "trace", "check", out])
    check(t.returncode == 0, f"trace check failed: {t.stdout[-2000:]} {t.stderr[-2000:]}")
    if not args.case.startswith("ref"):
        v = T.run([args.bin, "verify", out, "--against", ref])
        print(v.stdout)
        verdict = v.stdout.split(": ")[1].split(" ")[0] if ": " in v.stdout else "?"
        check(verdict in expected.split("|"), f"equivalence class {verdict}, expected {expected}\n{v.stdout}{v.stderr}")
    check_sync_timeline(check, out, overrides)
    if "g32" in args.case or "o32" in args.case:
        check_pinned_backend(check, args, out)
    if "sel_" in args.case:
        check_every_record_bitwise(check, out, ref)
    if args.case in ALSO_BITWISE:
        check_every_record_bitwise(check, out, os.path.join(args.work, ALSO_BITWISE[args.case]))
    if args.case in REPEAT:
        again = T.fresh(out + "_again")
        p = T.run(T.launch(args.bin, ranks) + ["train", "--out", again] + COMMON + T.sets(overrides))
        v = T.run([args.bin, "verify", again, "--against", out])
        check(p.returncode == 0 and "bitwise-equal" in v.stdout, f"a second run is not bitwise equal:\n{v.stdout}")
        print("repeat:", v.stdout.splitlines()[0] if v.stdout else "?")
    return check.verdict(args.case)


if __name__ == "__main__":
    sys.exit(main())
