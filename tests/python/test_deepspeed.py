"""examples/deepspeed/train.py: a Hugging Face LlamaForCausalLM under DeepSpeed's engine, ZeRO-1, 2 and 3 on its CPU
accelerator, recorded through the engine's seams (python/shardproof_torch/deepspeed_engine.py). Checked from the
files: the contract (dp 2, the ZeRO stage, the gradient divisor dp x accumulation steps), every tensor tiled exactly
once by the flat fragments DeepSpeed's partitions hold (a norm weight split across the two partitions), the clip
norm DeepSpeed computed equal to the single-device run's, and DeepSpeed's own collectives traced in their phases."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from recording_check import check_recording, jsonl, record  # noqa: E402


def check_zero(out, zero):
    contract, ops = check_recording(out, 2, zero, 2, 1)
    assert contract["loss"]["gradient_divisor"] == 4  # dp 2 x 2 accumulation steps
    shards = [r["shard"] for rank in (0, 1) for r in jsonl(os.path.join(out, "records", f"rank-{rank:05d}.jsonl"))
              if r["kind"] == "tensor" and r["step"] == 0 and r["phase"] == "grad"]
    assert any(isinstance(s, dict) and s["start"] > 0 for s in shards)  # a fragment that starts inside a tensor
    return ops


def test_zero2(tmp_path):
    ops = check_zero(record(tmp_path, "deepspeed", "--zero", "2"), 2)
    assert {("dp", "all_reduce", "grad_sync"), ("dp", "all_gather", "optimizer"), ("dp", "all_reduce",
                                                                                 "evidence")} <= ops


@pytest.mark.long
def test_zero1(tmp_path):
    ops = check_zero(record(tmp_path, "deepspeed", "--zero", "1"), 1)
    assert {("dp", "all_reduce", "grad_sync"), ("dp", "all_gather", "optimizer")} <= ops


@pytest.mark.long
def test_zero3(tmp_path):
    ops = check_zero(record(tmp_path, "deepspeed", "--zero", "3"), 3)
    assert {("world", "all_gather", "forward"), ("world", "reduce_scatter", "grad_sync")} <= ops
