"""examples/deepspeed/train.py: a Hugging Face LlamaForCausalLM under DeepSpeed's engine, ZeRO-1, 2 and 3 on its CPU
accelerator, recorded through the engine's seams (python/shardproof_torch/deepspeed_engine.py) and judged by
`shardproof judge`, its ZeRO partitions read as flat {"start", "numel"} fragments of each tensor (judge/shard.h).
Checked from the files: the contract (dp 2, the ZeRO stage, the gradient divisor dp x accumulation steps), every
tensor tiled exactly once by the fragments (a norm weight split across the two partitions), the clip norm DeepSpeed
computed equal to the single-device run's, DeepSpeed's own collectives traced in their phases. Judged: every math
view (gradients, update bit for bit, loss, lr, replicas, records) compared and passed; ZeRO-1/2's traffic compared
with the model of DeepSpeed's flat parameter groups (contract strategy.deepspeed: an all-reduce of every gradient
element per reduction pass, an all-gather of each padded group after the step): PASS, exit 0. ZeRO-3: its gradient
reduce-scatters compared (every backward, each parameter padded to a multiple of dp), its forward and backward
parameter gathers named as not compared (they follow a module trace and reuse thresholds): UNVERIFIED, exit 3,
never PASS. --bug ds-bucket-skipped (a gradient slice DeepSpeed's allreduce_and_scatter never all-reduces from step
1) FAILs the traffic view at step 1, grad_sync on dp[tp0.pp0], as the first divergence. open-instruct#1498's loop
(--manual-accumulation: only the last micro-batch's gradient reaches a ZeRO-2 step) FAILs at gradients, step 0;
records edited to cut a fragment short or to reach past its tensor are refused naming the elements."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from recording_check import (check_recording, edited_records, first_divergence, judge, judged_rows,  # noqa: E402
                             jsonl, record, refused)

TRAFFIC = "traffic equals the model of the recorded layout"
GRADIENTS = "gradients equal the engine's single-device gradient at every step"
UPDATE = "update equals the engine's AdamW replay at every step"


def check_zero(out, zero):
    contract, ops = check_recording(out, 2, zero, 2, 1)
    assert contract["loss"]["gradient_divisor"] == 4  # dp 2 x 2 accumulation steps
    shards = [r["shard"] for rank in (0, 1) for r in jsonl(os.path.join(out, "records", f"rank-{rank:05d}.jsonl"))
              if r["kind"] == "tensor" and r["step"] == 0 and r["phase"] == "grad"]
    assert any(isinstance(s, dict) and s["start"] > 0 for s in shards)  # a fragment that starts inside a tensor
    return ops


# ZeRO-1/2 traffic of the example (2 ranks, 2 micro-batches each): DeepSpeed's two parameter groups (decay and
# no decay), and its gradient reductions a step: ZeRO-2 at every backward, ZeRO-1 at the accumulation boundary
REDUCTIONS = {1: 1, 2: 2}


def check_judged(out, steps, zero):
    """Every math view compared and passed. ZeRO-1/2: the traffic view's 2 cells a step (grad_sync, optimizer on
    dp[tp0.pp0]) compared and equal: PASS (exit 0). ZeRO-3: its grad_sync cells equal, its forward and backward
    cells named as not compared: UNVERIFIED (exit 3)."""
    judged, gate = judge(out)
    rows = judged_rows(judged, gate)
    verdict = "PASS" if zero < 3 else "UNVERIFIED"
    assert judged.returncode == (0 if zero < 3 else 3) and gate["verdict"] == verdict, judged.stdout + judged.stderr
    assert all(c["passed"] or not c["required"] for c in rows.values()), rows
    assert f"{steps} of {steps} steps × 21 tensors" in rows[GRADIENTS]["measured"], rows[GRADIENTS]
    assert f"{steps} of {steps} steps replayed, {21 * steps} tensors, {21 * steps} bitwise" in \
        rows[UPDATE]["measured"], rows[UPDATE]
    traffic = rows[TRAFFIC]["measured"]
    with open(os.path.join(out, "judge", "summary.md")) as f:
        summary = f.read()
    if zero < 3:
        n = REDUCTIONS[zero]
        assert traffic.startswith(f"{2 * steps} cells of {steps} steps equal (dp: DeepSpeed's ZeRO-{zero}: 2 flat "
                                  f"parameter groups, {n} gradient reduction{'s' if n > 1 else ''} a step)"), traffic
        assert "NOT compared" not in traffic, traffic
        assert "**Verdict: PASS**" in summary
    else:
        # grad_sync compared at both steps; forward (both steps) and backward (step 0 only: step 1 gathers none)
        assert traffic.startswith(f"{steps} cells of {steps} steps equal (dp: DeepSpeed's ZeRO-3: 2 gradient "
                                  "reduce-scatters a step of its parameters' partitions)"), traffic
        assert "3 cells NOT compared (UNVERIFIED): DeepSpeed's ZeRO-3 parameter all-gathers follow the module " \
               "trace" in traffic, traffic
        assert "**Verdict: UNVERIFIED** — traffic not compared" in summary
    first, _ = first_divergence(out)
    assert first is None, first
    return rows


def is_grad(step, tensor=None):
    return lambda r: r["kind"] == "tensor" and r["step"] == step and r["phase"] == "grad" and \
        isinstance(r["shard"], dict) and (tensor is None or r["tensor"] == tensor)


def check_fragments_refused(out, tmp_path):
    """A fragment cut short (its record shortened consistently: shard, local, cover, count) leaves elements no piece
    holds; a fragment reaching past its tensor is refused as a shard; both name the file or the elements."""
    rec = next(r for r in jsonl(os.path.join(out, "records", "rank-00000.jsonl")) if is_grad(0)(r))
    end = rec["shard"]["start"] + rec["shard"]["numel"]

    def cut(r):
        r["shard"]["numel"] -= 1
        r["local"] -= 1
        r["cover"][1] -= 1
        r["count"] -= 1

    refused(edited_records(out, str(tmp_path / "cut"), 0, is_grad(0, rec["tensor"]), cut),
            f"step 0 grad {rec['tensor']}: logical elements [{end - 1}, {end})", "are in no piece")

    def past(r):
        r["shard"]["start"] = r["numel"] - r["shard"]["numel"] + 1

    refused(edited_records(out, str(tmp_path / "past"), 0, is_grad(0, rec["tensor"]), past),
            "records/rank-00000.jsonl:", "record.shard = ", "pass the tensor's", "hint:")


def test_zero2(tmp_path):
    out = record(tmp_path, "deepspeed", "--zero", "2")
    ops = check_zero(out, 2)
    assert {("dp", "all_reduce", "grad_sync"), ("dp", "all_gather", "optimizer"), ("dp", "all_reduce",
                                                                                 "evidence")} <= ops
    check_judged(out, 2, 2)
    check_fragments_refused(out, tmp_path)


def edited_contract(out, dest, change):
    """A copy of the recording `out` at `dest` whose contract.json has change(doc) applied, its hash recomputed as
    the recorder computes it (python/shardproof_torch/segment.py) and rank 0's seal entry for it updated, as someone
    who edits a recording would. Returns dest."""
    import hashlib
    import json
    import shutil
    shutil.copytree(out, dest, ignore=shutil.ignore_patterns("judge"))
    path = os.path.join(dest, "contract.json")
    with open(path) as f:
        doc = json.load(f)
    doc.pop("hash")
    change(doc)
    body = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    doc["hash"] = hashlib.sha256(body.encode()).hexdigest()
    data = json.dumps(doc, indent=2, sort_keys=True).encode()
    with open(path, "wb") as f:
        f.write(data)
    seal_path = os.path.join(dest, "seal", "rank-00000.json")
    with open(seal_path) as f:
        seal = json.load(f)
    seal["files"]["contract.json"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    with open(seal_path, "w") as f:
        json.dump(seal, f, indent=2, sort_keys=True)
    return dest


def check_deepspeed_config_edited(out, tmp_path):
    """strategy.deepspeed edited: a group without model.norm.weight leaves the dp cells named as not compared
    (UNVERIFIED, exit 3, naming the tensor), never passed; a bucket size that is not an integer is refused (exit 2)
    naming the field."""
    def drop_norm(doc):
        for g in doc["strategy"]["deepspeed"]["groups"]:
            if "model.norm.weight" in g:
                g.remove("model.norm.weight")

    judged, gate = judge(edited_contract(out, str(tmp_path / "groups"), drop_norm))
    rows = judged_rows(judged, gate)
    assert judged.returncode == 3 and gate["verdict"] == "UNVERIFIED", judged.stdout + judged.stderr
    traffic = rows[TRAFFIC]["measured"]
    assert traffic.startswith("no cell compared") and \
        "cells NOT compared (UNVERIFIED): 'model.norm.weight' is in no DeepSpeed parameter group" in traffic, traffic

    def text_size(doc):
        doc["strategy"]["deepspeed"]["reduce_bucket_size"] = "5e8"
    refused(edited_contract(out, str(tmp_path / "size"), text_size), "strategy.deepspeed.reduce_bucket_size")


@pytest.mark.long
def test_zero1(tmp_path):
    out = record(tmp_path, "deepspeed", "--zero", "1")
    ops = check_zero(out, 1)
    assert {("dp", "all_reduce", "grad_sync"), ("dp", "all_gather", "optimizer")} <= ops
    check_judged(out, 2, 1)
    check_deepspeed_config_edited(out, tmp_path)


@pytest.mark.long
def test_zero3(tmp_path):
    out = record(tmp_path, "deepspeed", "--zero", "3")
    ops = check_zero(out, 3)
    assert {("world", "all_gather", "forward"), ("world", "reduce_scatter", "grad_sync")} <= ops
    check_judged(out, 2, 3)


def check_bucket_skipped(out):
    """The traffic view FAILs at step 1 (the bug's first step), grad_sync on dp[tp0.pp0], ranks 0 and 1, bytes short
    of the model: the first divergence (the gradients view fails at step 1 too, a later point)."""
    judged, gate = judge(out)
    rows = judged_rows(judged, gate)
    assert judged.returncode == 1 and gate["verdict"] == "FAIL", judged.stdout + judged.stderr
    assert not rows[TRAFFIC]["passed"], rows[TRAFFIC]
    assert rows[TRAFFIC]["detail"].startswith("step 1 grad_sync on dp[tp0.pp0]: "), rows[TRAFFIC]
    first, pattern = first_divergence(out)
    assert (first["view"], first["step"], first["phase"], first["tensor"], first["ranks"]) == \
        ("traffic", 1, "grad_sync", "dp[tp0.pp0]", [0, 1]), first
    assert first["steps_failing"] == 1 and "bytes fewer than the model" in pattern, (first, pattern)


@pytest.mark.long
def test_zero2_bucket_skipped_fails_traffic(tmp_path):
    check_bucket_skipped(record(tmp_path, "deepspeed", "--zero", "2", "--bug", "ds-bucket-skipped"))


@pytest.mark.long
def test_zero1_bucket_skipped_fails_traffic(tmp_path):
    check_bucket_skipped(record(tmp_path, "deepspeed", "--zero", "1", "--bug", "ds-bucket-skipped"))


@pytest.mark.long
def test_zero2_manual_accumulation_fails_at_gradients(tmp_path):
    """open-instruct#1498 as DeepSpeed 0.19.8 ships it: gradient_accumulation_steps 1 and k backward calls before
    one engine.step() under ZeRO-2; every backward is a boundary, so each rank's step sees its last micro-batch's
    gradient only. The loss view passes (the objective's weight is the single-device 1/N); the gradients view
    FAILs at step 0 on every tensor, and that is the first divergence."""
    out = record(tmp_path, "deepspeed", "--zero", "2", "--manual-accumulation", steps=2)
    judged, gate = judge(out)
    rows = judged_rows(judged, gate)
    assert judged.returncode == 1 and gate["verdict"] == "FAIL", judged.stdout + judged.stderr
    assert not rows[GRADIENTS]["passed"], rows[GRADIENTS]
    first, _ = first_divergence(out)
    assert (first["view"], first["step"]) == ("gradients", 0), first
    assert first["tensors_failing"] == 21, first
