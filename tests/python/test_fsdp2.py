"""examples/fsdp2/train.py recorded with Recorder.attach: FSDP2 ZeRO-3 on 3 ranks (torch.chunk's uneven rows: the
(offsets, sizes) shard form), ZeRO-2, and FSDP2 + tensor parallelism on a 2 x 2 mesh. Checked from the files, as
the judge's reader will: the contract's grid and ZeRO stage, every (step, phase, tensor)'s summaries tiling the
logical tensor exactly once, the replicas' SHA-256 equal, FSDP2's all-gathers and reduce-scatters (and TP's
all-reduces) traced on the grid's groups in their phases, and the clip norm equal to the same model's under DDP
on one process (examples/hf_ddp, the same seed and batches) to 4 digits."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from recording_check import check_recording, jsonl, record  # noqa: E402


def test_fsdp2_zero3_uneven_shards(tmp_path):
    out = record(tmp_path, "fsdp2", "--world", "3", "--micro-batches", "3")
    contract, ops = check_recording(out, 3, 3, 3, 1, micro_batches=3)
    assert {("dp", "all_gather", "forward"), ("dp", "all_gather", "backward"),
            ("dp", "reduce_scatter", "grad_sync")} <= ops
    recs = jsonl(os.path.join(out, "records", "rank-00002.jsonl"))
    emb = next(r for r in recs if r["kind"] == "tensor" and r["tensor"] == "model.embed_tokens.weight")
    assert emb["shard"] == {"offsets": [86, 0], "sizes": [42, 64]}  # 128 rows in 3: 43, 43, 42


@pytest.mark.long
def test_fsdp2_zero2(tmp_path):
    _, ops = check_recording(record(tmp_path, "fsdp2", "--zero", "2"), 2, 2, 2, 1)
    assert ("dp", "all_gather", "backward") not in ops  # parameters kept after forward


@pytest.mark.long
def test_fsdp2_with_tensor_parallel_2x2(tmp_path):
    _, ops = check_recording(record(tmp_path, "fsdp2", "--world", "4", "--tp", "2"), 4, 3, 2, 2)
    assert {("tp", "all_reduce", "forward"), ("tp", "all_reduce", "backward"),
            ("dp", "reduce_scatter", "grad_sync")} <= ops
