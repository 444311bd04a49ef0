#!/usr/bin/env python3
"""Every required criterion of the gate judges every position it claims (issue 31, item 4b).

gate_tamper.py alters the fixture bundle once per criterion; a criterion that silently checks only some steps,
ranks or stages would pass it. Here each criterion is attacked on its own at several positions — the first,
a middle and the last step, odd and even steps, each stage, the first and the last rank — one edit per copy
(resealed where the seal is not what is tested), and `verify` must FAIL that criterion naming the position
(the step, the rank, the stage's file). The fixture is the signed dp 2 x pp 2 bundle of gate_tamper.py `base`
(6 steps, checkpoint at step 3, evals after steps 2 and 5 and at initialization, 4 ranks).
Usage: gate_positions.py --bin shardproof --work DIR (the directory gate_tamper.py base wrote)
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402
from bundle_edit import (copy_bundle, drop_records, edit_records, loss_bits, read_json, replace_file,  # noqa: E402
                         reseal, write_json)

LAST_RANK = 3
LAST_STEP = 5


def stage_file(b, stage, *parts):
    return os.path.join(b, stage, *parts)


def trace(b, stage, rank):
    return stage_file(b, stage, "trace", f"rank-{rank:05d}.jsonl")


def at(step, phase=None):
    return lambda r, i: r.get("step") == step and (phase is None or r.get("phase") == phase)


# --------------------------------------------------------------------------------------------- edits
def touch_file(rel):
    def edit(b):
        p = os.path.join(b, rel)
        with open(p, "rb") as f:
            data = f.read()
        replace_file(p, data.decode() + " ")
    return edit


def contract_seed(stage):
    def edit(b):
        p = stage_file(b, stage, "contract.json")
        d = read_json(p)
        d["config"]["train"]["seed"] += 1
        write_json(p, d)
    return edit


def metric(stage, step, key, change):
    def edit(b):
        n = edit_records(stage_file(b, stage, "metrics.jsonl"), lambda r, i: r.get("step") == step and key in r,
                         lambda r: r.update({key: change(r[key])}))
        if n != 1:
            T.fail(f"{stage}/metrics.jsonl: {n} records with {key} at step {step}")
    return edit


def drop_loss_record(stage, name, step):
    return lambda b: drop_records(stage_file(b, stage, name), lambda r, i: r.get("step") == step and
                                  (r.get("phase") == "loss" or "loss" in r and name == "metrics.jsonl"))


def drop_trace_step(stage, rank, step):
    return lambda b: drop_records(trace(b, stage, rank), at(step))


def stage_exit(stage):
    def edit(b):
        p = os.path.join(b, "prove.json")
        d = read_json(p)
        for s in d["stages"]:
            if s["name"] == stage:
                s["exit_code"] = 1
        write_json(p, d)
    return edit


def topology_coords(rank):
    def edit(b):
        p = stage_file(b, "parallel", "topology.json")
        d = read_json(p)
        r = next(x for x in d["ranks"] if x["world_rank"] == rank)
        r["coords"]["dp"] = 1 - r["coords"]["dp"]
        write_json(p, d)
    return edit


def drop_collective(rank, step):
    """One collective of `rank` at `step` (its first outside the pipeline's p2p)."""
    def edit(b):
        seen = []
        drop_records(trace(b, "parallel", rank), lambda r, i: r["step"] == step and r["op"] not in (
            "send", "recv", "isend", "irecv") and not seen and not seen.append(i))
    return edit


def prediction_class(rank, cls):
    def edit(b):
        p = stage_file(b, "parallel", "comm_predicted.json")
        d = read_json(p)
        d["ranks"][rank]["classes"][cls] = {}
        replace_file(p, json.dumps(d, separators=(",", ":"), sort_keys=True) + "\n")
    return edit


def ledger_category(rank, category, key):
    def edit(b):
        p = stage_file(b, "parallel", "ledger.json")
        d = read_json(p)
        r = next(x for x in d["ranks"] if x["rank"] == rank)
        r["categories"][category][key] += 64  # the file's own "equal" flags are left true
        write_json(p, d)
    return edit


def digest(stage, step, phase, pick_last=False):
    def edit(b):
        p = stage_file(b, stage, "checksums.jsonl")
        keys = [i for i, line in enumerate(open(p)) if (lambda r: r["step"] == step and r["phase"] == phase)(
            json.loads(line))]
        chosen = keys[-1] if pick_last else keys[0]
        edit_records(p, lambda r, i: i == chosen, lambda r: r.update(digest="0" * 32))
    return edit


def shard_byte(rank_file):
    def edit(b):
        d = stage_file(b, "parallel", "checkpoints", "step-000003")
        name = f"rank-{rank_file:05d}.safetensors"
        p = os.path.join(d, name)
        with open(p, "rb") as f:
            data = bytearray(f.read())
        data[len(data) // 2] ^= 1
        tmp = p + ".edit-tmp"
        with open(tmp, "wb") as f:
            f.write(bytes(data))
        os.replace(tmp, p)
    return edit


def drop_checkpoint_load(rank):
    return lambda b: drop_records(trace(b, "recovery", rank), lambda r, i: r["phase"] == "checkpoint")


def fault_step(step):
    def edit(b):
        p = os.path.join(b, "prove.json")
        d = read_json(p)
        d["fault"] = d["fault"].replace("@3", f"@{step}")
        write_json(p, d)
    return edit


def eval_value(stage, step):
    return metric(stage, step, "eval_loss", lambda v: v + 1e-6)


def loss_value(stage, step):
    def edit(b):
        metric(stage, step, "loss", lambda v: v + 1e-9)(b)
    return edit


# criterion: [(position, edit, reseal, text the criterion's lines must contain)]
POSITIONS = {
    "bundle sealed and unmodified": [
        ("reference metrics", touch_file("reference/metrics.jsonl"), False, "reference/metrics.jsonl"),
        ("last rank's trace", touch_file("parallel/trace/rank-00003.jsonl"), False, "parallel/trace/rank-00003.jsonl"),
        ("prove.json", touch_file("prove.json"), False, "prove.json"),
    ],
    "one contract across the stages": [
        (s, contract_seed(s), True, f"{s}/contract.json") for s in ("reference", "fault", "recovery")],
    "records agree across views": [
        ("reference step 0", loss_value("reference", 0), True, "step 0: reference/metrics.jsonl"),
        ("parallel step 3", loss_value("parallel", 3), True, "step 3: parallel/metrics.jsonl"),
        ("fault step 1", loss_value("fault", 1), True, "step 1: fault/metrics.jsonl"),
        ("recovery step 5", loss_value("recovery", 5), True, "step 5: recovery/metrics.jsonl"),
    ],
    "gradient norms agree across views": [
        (f"{s} step {n}", metric(s, n, "grad_norm", lambda v: v * (1 + 1e-9)), True, f"{s}/metrics.jsonl: step {n}")
        for s, n in (("reference", 0), ("parallel", 2), ("fault", 1), ("recovery", 5))],
    "clipping and skips follow the gradient": [
        (f"{s} step {n}", metric(s, n, "clip", lambda v: v * 0.5), True, f"{s}/metrics.jsonl: step {n}")
        for s, n in (("reference", 0), ("parallel", 2), ("fault", 1), ("recovery", 5))],
    "learning rates follow the contract's schedule": [
        (f"{s} step {n}", metric(s, n, "lr", lambda v: v * (1 + 1e-12)), True, f"{s}/metrics.jsonl: step {n}")
        for s, n in (("reference", 1), ("parallel", 4), ("recovery", 5))],
    "every view holds the contract's steps": [
        ("reference metrics step 0", drop_loss_record("reference", "metrics.jsonl", 0), True,
         "reference/metrics.jsonl: step 0 is missing"),
        ("parallel checksums step 3", drop_loss_record("parallel", "checksums.jsonl", 3), True,
         "parallel/checksums.jsonl: step 3 is missing"),
        ("recovery trace rank 2 step 5", drop_trace_step("recovery", 2, 5), True,
         "recovery/trace/rank-00002.jsonl: step 5 is missing"),
    ],
    "stages completed": [(s, stage_exit(s), True, f"{s}: exit 1") for s in ("reference", "parallel", "recovery")],
    "topology valid": [(f"rank {r}", topology_coords(r), True, f"rank {r}") for r in (0, LAST_RANK)],
    "traces consistent": [(f"rank {r} step {s}", drop_collective(r, s), True, f"rank {r}")
                          for r, s in ((0, 0), (LAST_RANK, LAST_STEP))],
    "traced bytes equal the prediction": [(f"rank {r} step {s}", drop_collective(r, s), True, f"rank {r}, step {s}")
                                          for r, s in ((1, 1), (2, 4))],
    "prediction re-derived from the contract": [
        (f"rank {r} {c}", prediction_class(r, c), True, f"rank {r}, step class '{c}'")
        for r, c in ((0, "step"), (LAST_RANK, "step+checksums+eval"))],
    "memory ledger equals the prediction": [
        ("rank 0 param peak", ledger_category(0, "param", "measured_peak"), True, "rank 0 (dp0.tp0.pp0), param"),
        ("last rank activation live", ledger_category(LAST_RANK, "activation", "measured_live"), True,
         f"rank {LAST_RANK} ("),
    ],
    "gradients equal the single-device reference": [
        (f"step {n} {ph}", digest("parallel", n, ph, last), True, f"step {n} {ph}")
        for n, ph, last in ((0, "grad", False), (3, "param", True), (4, "grad", True), (LAST_STEP, "param", True))],
    "checkpoints verify": [(f"rank {r}'s shard", shard_byte(r), True, f"step-000003/rank-{r:05d}.safetensors")
                           for r in (0, LAST_RANK)],
    "resume is exact": [(f"recovery step {n}", digest("recovery", n, "grad"), True, f"step {n} grad")
                        for n in (3, LAST_STEP)],
    "recovery resumed from its checkpoint": [(f"rank {r}", drop_checkpoint_load(r), True, f"rank {r} holds no")
                                             for r in (0, LAST_RANK)],
    "fault detected and localized": [("fault step 4", fault_step(4), True, "injected at step 4")],
    "recovery reproduces the reference": [
        ("recovery eval after step 5", eval_value("recovery", LAST_STEP), True, "the eval after step 5"),
        ("recovery step 4", digest("recovery", 4, "param"), True, "step 4 param"),
    ],
    "held-out eval improves and matches the reference": [
        (f"eval {n}", eval_value("parallel", n), True, "the initial eval" if n < 0 else f"the eval after step {n}")
        for n in (-1, 2, LAST_STEP)],
}


def criterion_lines(text, name):
    out = text.splitlines()
    for i, line in enumerate(out):
        if line.startswith("  FAIL " + name):
            return "\n".join(out[i:i + 2])
    return None


def main():
    args = T.case_args(["all"])
    base = os.path.join(args.work, "base")
    if not os.path.isfile(os.path.join(base, "bundle.sha256")):
        T.fail("the fixture bundle is missing: run gate_tamper.py base first")
    failures, cases = [], 0
    for name, positions in POSITIONS.items():
        for label, edit, do_reseal, expect in positions:
            cases += 1
            out = copy_bundle(base, os.path.join(args.work, "position"))
            edit(out)
            if do_reseal:
                reseal(out)
            v = T.run([args.bin, "verify", out])
            lines = criterion_lines(v.stdout, name)
            if lines is None or expect not in lines:
                failures.append(f"{name} / {label}: " + (f"did not fail (exit {v.returncode})" if lines is None
                                                         else f"failed without naming {expect!r}:\n{lines}"))
                print("FAIL", failures[-1], flush=True)
            else:
                print(f"ok   {name} / {label}: {lines.splitlines()[-1].strip()[:150]}", flush=True)
    T.fresh(os.path.join(args.work, "position"))
    print(f"{cases - len(failures)} of {cases} edits failed their criterion naming the position")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
