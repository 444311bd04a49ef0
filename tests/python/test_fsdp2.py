"""examples/fsdp2/train.py recorded with Recorder.attach: FSDP2 ZeRO-3 on 3 ranks (torch.chunk's uneven rows: the
(offsets, sizes) shard form), ZeRO-2, and FSDP2 + tensor parallelism on a 2 x 2 mesh. Checked from the files, as
the judge's reader will: the contract's grid and ZeRO stage, every (step, phase, tensor)'s summaries tiling the
logical tensor exactly once, the replicas' SHA-256 equal, FSDP2's all-gathers and reduce-scatters (and TP's
all-reduces) traced on the grid's groups in their phases, and the clip norm equal to the same model's under DDP
on one process (examples/hf_ddp, the same seed and batches) to 4 digits."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.environ.get("SP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXAMPLE = os.path.join(ROOT, "examples", "fsdp2", "train.py")
# `examples/hf_ddp/train.py --world 1 --steps 2 [--micro-batches M]`: the gradient norms of its two steps on one
# process, by micro-batches per step M
SINGLE_NORMS = {4: (1.5271, 1.9563), 3: (1.8194, 2.0453)}


def record(tmp_path, *args):
    out = str(tmp_path / "run")
    subprocess.run([sys.executable, EXAMPLE, "--steps", "2", "--out", out, "--quiet", *args], check=True,
                   env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=900)
    return out


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def box(rec, shape):
    """(offsets, sizes) of a tensor record's shard field, any form."""
    s = rec["shard"]
    if s is None:
        return [0] * len(shape), list(shape)
    if isinstance(s, dict):
        return s["offsets"], s["sizes"]
    dim, index, parts = s
    sizes = list(shape)
    sizes[dim] //= parts
    offsets = [0] * len(shape)
    offsets[dim] = index * sizes[dim]
    return offsets, sizes


def check_recording(out, world, zero, dp, tp, micro_batches=4):
    with open(os.path.join(out, "contract.json")) as f:
        contract = json.load(f)
    assert contract["strategy"]["zero"] == zero and (contract["strategy"]["dp"], contract["strategy"]["tp"]) == (dp, tp)
    from shardproof_torch import layout
    shapes = layout.logical_shapes(contract["model"])
    covered, holders, norms = {}, {}, {}
    for r in range(world):
        for rec in jsonl(os.path.join(out, "records", f"rank-{r:05d}.jsonl")):
            if rec["kind"] == "step":
                norms.setdefault(rec["step"], set()).add(round(rec["grad_norm"], 4))
                continue
            key = (rec["step"], rec["phase"], rec["tensor"])
            offsets, sizes = box(rec, shapes[rec["tensor"]])
            n = 1
            for s in sizes:
                n *= s
            assert rec["local"] == n, rec
            holders.setdefault(key + (tuple(offsets), tuple(sizes)), set()).add(rec["sha256"])
            covered[key] = covered.get(key, 0) + rec["count"]
    for (step, phase, tensor), count in covered.items():
        n = 1
        for s in shapes[tensor]:
            n *= s
        assert count == n, f"{tensor} at step {step} ({phase}): {count} of {n} elements summarized"
    assert all(len(s) == 1 for s in holders.values()), "replicas of a box differ"
    assert [sorted(norms[s]) for s in sorted(norms)] == [[x] for x in SINGLE_NORMS[micro_batches]], norms
    ops = set()
    for r in range(world):
        for t in jsonl(os.path.join(out, "trace", f"rank-{r:05d}.jsonl")):
            ops.add((t["group"].split("[")[0], t["op"], t["phase"]))
    return contract, ops


def test_fsdp2_zero3_uneven_shards(tmp_path):
    out = record(tmp_path, "--world", "3", "--micro-batches", "3")
    contract, ops = check_recording(out, 3, 3, 3, 1, micro_batches=3)
    assert {("dp", "all_gather", "forward"), ("dp", "all_gather", "backward"),
            ("dp", "reduce_scatter", "grad_sync")} <= ops
    recs = jsonl(os.path.join(out, "records", "rank-00002.jsonl"))
    emb = next(r for r in recs if r["kind"] == "tensor" and r["tensor"] == "model.embed_tokens.weight")
    assert emb["shard"] == {"offsets": [86, 0], "sizes": [42, 64]}  # 128 rows in 3: 43, 43, 42


@pytest.mark.long
def test_fsdp2_zero2(tmp_path):
    _, ops = check_recording(record(tmp_path, "--zero", "2"), 2, 2, 2, 1)
    assert ("dp", "all_gather", "backward") not in ops  # parameters kept after forward


@pytest.mark.long
def test_fsdp2_with_tensor_parallel_2x2(tmp_path):
    _, ops = check_recording(record(tmp_path, "--world", "4", "--tp", "2"), 4, 3, 2, 2)
    assert {("tp", "all_reduce", "forward"), ("tp", "all_reduce", "backward"),
            ("dp", "reduce_scatter", "grad_sync")} <= ops
