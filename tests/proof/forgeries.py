#!/usr/bin/env python3
"""Consistent forgeries of a proof bundle, re-run (issue 45; docs/testing.md §"Forgeries"): each edits every
file a verdict reads alike and reseals, as a forger who knows the format would, and states what stops it.

  skip_forged         a step recorded as skipped (non-finite gradient) in every stage's metrics: the clipping and
                      skips row (a skip needs non-finite gradient records, and leaves the parameters)
  fp16_base           fixture: an fp16 proof (dynamic loss scaling) with a forced overflow in the fault stage, PASS
  loss_scale_forged   an fp16 step's loss scale doubled in metrics and in the scaler record of every stage, its
                      unscaled norm halved to match: the clipping and skips row (the clip of that norm, and the
                      scales are the contract's [fp16] scaler over the recorded overflows)
  recovery_fabricated (F5) a recovery made up from the parallel run, every timestamp shifted and the
                      checkpoint-load records added: no row can tell it from a real one (it repeats the run it
                      claims to repeat); only the signature stops it: verify --key FAILs
  steps_cut           (F7) the run cut from 6 to 5 steps: contracts and their hashes, the learning rates of the
                      new schedule, every view's records and the last checkpoint: the checkpoints row (each
                      manifest binds the contract it was saved under)
The fp32 cases use gate_tamper.py's `base` fixture (ctest proof.base). Usage: forgeries.py CASE --bin shardproof
--work DIR (the work directory of gate_tamper.py).
"""
import hashlib
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import gate_tamper as G  # noqa: E402
import sp_test as T  # noqa: E402
from bundle_edit import dump_like_engine, edit_records, lines, read_json, reseal, write_json, write_lines  # noqa: E402

STAGES = G.STAGES


def skip_forged(b):
    for stage in STAGES:
        edit_records(os.path.join(b, stage, "metrics.jsonl"), lambda r, i: r.get("step") == 4 and "loss" in r,
                     lambda r: r.update(skipped=True, finite=False))


def loss_scale_forged(b):
    for stage in STAGES:
        # The norm is recorded unscaled (√Σ l2² / scale): a doubled scale halves it, as the forger keeps it.
        edit_records(os.path.join(b, stage, "metrics.jsonl"), lambda r, i: r.get("step") == 1 and "loss" in r,
                     lambda r: r.update(loss_scale=r["loss_scale"] * 2, grad_norm=r["grad_norm"] / 2))
        edit_records(os.path.join(b, stage, "checksums.jsonl"), lambda r, i: r["step"] == 1 and r["phase"] == "scaler",
                     lambda r: r.update(scale=r["scale"] * 2))


SHIFT_US = 7_000_000  # the fabricated recovery "ran" 7 s after the parallel run


def recovery_fabricated(b):
    """F5: the recovery stage made up from the parallel stage (which it must repeat from step k = 3): its metrics,
    checksums, activations, ledger and prediction copied, its traces and timelines from step 3 on with every time
    shifted, and each rank's checkpoint-save records of step 3 relabelled as the load the recovery would do."""
    par, rec = os.path.join(b, "parallel"), os.path.join(b, "recovery")
    checkpoints = os.path.join(rec, "checkpoints")
    keep = os.path.join(b, "kept-checkpoints")
    shutil.move(checkpoints, keep)  # a recovery writes no checkpoint here; keep what it had
    shutil.rmtree(rec)
    shutil.copytree(par, rec, ignore=shutil.ignore_patterns("checkpoints"))
    shutil.move(keep, checkpoints)
    for sub in ("trace", "timeline"):
        for name in os.listdir(os.path.join(rec, sub)):
            path, out, seq = os.path.join(rec, sub, name), [], {}
            for line in lines(path):
                r = json.loads(line)
                # The set-up and the steps from k on (the save of step k standing for the load); a resumed run
                # does not evaluate its initial state.
                if 0 <= r.get("step", 3) < 3 or (r.get("step") == -1 and r.get("phase") not in (None, "setup")):
                    continue
                for k in ("t_start_us", "t_end_us"):
                    if isinstance(r.get(k), int) and r[k] > 0:
                        r[k] += SHIFT_US
                if "seq" in r:  # renumbered per group, as a process that started here numbers them
                    r["seq"] = seq.get(r["group"], 0)
                    seq[r["group"]] = r["seq"] + 1
                out.append(dump_like_engine(r))
            write_lines(path, out)


def contract_with_steps(c, steps):
    c = dict(c)
    c["config"] = json.loads(json.dumps(c["config"]))
    c["config"]["train"]["steps"] = steps
    c.pop("hash", None)
    c["hash"] = hashlib.sha256(dump_like_engine(c).encode()).hexdigest()
    return c


def steps_cut(b):
    """F7: 6 steps made 5: every contract (hash recomputed), every view's step-5 records, the eval after it, the
    learning rates as the 5-step schedule gives them (the lr of the schedule, as optim::LrSchedule computes it),
    the step-6 checkpoint and LATEST. The checkpoint manifests still hold the contract they were saved under."""
    import math
    old = read_json(os.path.join(b, "contract.json"))
    for d, _, names in os.walk(b):
        for n in names:
            p = os.path.join(d, n)
            if n == "contract.json":
                write_json(p, contract_with_steps(read_json(p), 5))
            elif n.endswith(".jsonl") and "checkpoints" not in p:
                kept, seq = [json.loads(l) for l in lines(p) if json.loads(l).get("step", 0) < 5], {}
                for r in kept:
                    if "seq" in r:  # a trace renumbered per group, as a 5-step run numbers it
                        r["seq"] = seq.get(r["group"], 0)
                        seq[r["group"]] = r["seq"] + 1
                write_lines(p, [dump_like_engine(r) for r in kept])
    tr = old["config"]["train"]
    for stage in STAGES:
        def cosine(r):
            s, warm, total = r["step"], tr["warmup_steps"], 5
            if s >= warm:
                prog = min(1.0, (s - warm) / max(1, total - warm))
                r["lr"] = tr["min_lr"] + 0.5 * (tr["lr"] - tr["min_lr"]) * (1 + math.cos(math.pi * prog))
        edit_records(os.path.join(b, stage, "metrics.jsonl"), lambda r, i: "lr" in r, cosine)
        ck = os.path.join(b, stage, "checkpoints")
        if os.path.isdir(os.path.join(ck, "step-000006")):
            shutil.rmtree(os.path.join(ck, "step-000006"))
            m = read_json(os.path.join(ck, "step-000003", "manifest.json"))
            latest = read_json(os.path.join(ck, "LATEST"))
            latest.update(step=3, manifest_digest=m.get("digest", latest.get("manifest_digest")))
            write_json(os.path.join(ck, "LATEST"), latest)


CASES = {  # name: ((edit, reseal, criterion, text), fixture)
    "skip_forged": ((skip_forged, True, "clipping and skips follow the gradient", "gradient records say true"),
                    "base"),
    "loss_scale_forged": ((loss_scale_forged, True, "clipping and skips follow the gradient",
                           "reference/metrics.jsonl: step 1"),
                          "fp16_base"),
    "recovery_fabricated": ((recovery_fabricated, True, None, "signature: FAIL"), "base"),
    "steps_cut": ((steps_cut, True, "checkpoints verify", "contract"), "base"),
}


def check_fp16_base(args):
    out = os.path.join(args.work, "fp16_base")
    shutil.rmtree(out, ignore_errors=True)
    p = T.run([args.bin, "prove", "--out", out, "--fault", "nan-injection@4", "--quiet", "--sign",
               G.paths(args.work)[1]] + G.sets(["parallel.dp=2", "train.precision=fp16", "fp16.hysteresis=1",
                                                 "fp16.initial_scale_power=12"]))
    if p.returncode != 0:
        G.fail(f"the fp16 bundle did not PASS:\n{p.stdout[-4000:]}\n{p.stderr[-2000:]}")
    scales = [r["loss_scale"] for r in T.read_jsonl(os.path.join(out, "fault", "metrics.jsonl")) if "loss" in r]
    if len(set(scales)) < 2:
        G.fail(f"the fault stage's forced overflow did not move the loss scale: {scales}")
    print(f"PASS fp16_base: PASS with the fault stage's scales {scales}")


def main():
    args = T.case_args(["fp16_base"] + list(CASES))
    if args.case == "fp16_base":
        check_fp16_base(args)
        return
    spec, fixture = CASES[args.case]
    G.check_case(args, args.case, spec, os.path.join(args.work, fixture))


if __name__ == "__main__":
    main()
