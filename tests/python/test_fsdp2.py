"""examples/fsdp2/train.py recorded with Recorder.attach and judged: FSDP2 ZeRO-3 and ZeRO-2
(reshard_after_forward=False) of transformers' LlamaForCausalLM on 2 gloo ranks, judged PASS by `shardproof judge`
with every step's gradient checked, every tensor's update replayed bit for bit, and the traffic view comparing
FSDP2's own schedule (the recorded fully_shard units through plan/traffic_model: per unit an all-gather of its
padded flat shard per forward, again per backward when resharded after forward, a reduce-scatter per step) with
the traced bytes; on 3 ranks too (torch.chunk's uneven rows: the (offsets, sizes) shard form, judge/shard.h), with
edited boxes refused by name; FSDP2 + DTensor tensor parallelism on a 2 x 2 mesh judged PASS with traffic compared
(DTensor's ColwiseParallel / RowwiseParallel all-reduces and FSDP2's units over tp-local shards). Checked from the files as well: the contract's grid and ZeRO stage, every (step, phase, tensor)'s summaries tiling the logical tensor exactly once, the replicas'
SHA-256 equal, the collectives traced on the grid's groups in their phases, the clip norm the single-device run's."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from recording_check import check_recording, edited_records, judge, judged_rows, jsonl, record, refused  # noqa: E402

TRAFFIC = "traffic equals the model of the recorded layout"


def check_judged_pass(out, steps, resharded, cells_per_step):
    """PASS with every step checked, every update bitwise and the traffic cells of FSDP2's schedule compared."""
    judged, gate = judge(out)
    rows = judged_rows(judged, gate)
    assert judged.returncode == 0 and gate["verdict"] == "PASS", judged.stdout + judged.stderr
    assert all(c["passed"] or not c["required"] for c in rows.values()), rows
    assert f"{steps} of {steps} steps × 21 tensors" in \
        rows["gradients equal the engine's single-device gradient at every step"]["measured"]
    assert f"{steps} of {steps} steps replayed, {21 * steps} tensors, {21 * steps} bitwise" in \
        rows["update equals the engine's AdamW replay at every step"]["measured"]
    assert (f"{cells_per_step * steps} cells of {steps} steps equal (dp: FSDP2's schedule of 3 fully_shard units, "
            f"{resharded} resharded after forward)") in rows[TRAFFIC]["measured"], rows[TRAFFIC]
    assert "NOT compared" not in rows[TRAFFIC]["measured"]
    return rows


def test_fsdp2_zero3_judged(tmp_path):
    out = record(tmp_path, "fsdp2", steps=2)
    with open(os.path.join(out, "contract.json")) as f:
        units = json.load(f)["strategy"]["units"]
    assert [u["reshard_after_forward"] for u in units] == [True] * 3
    assert units[0]["tensors"] == ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"]
    check_judged_pass(out, 2, 3, 3)  # forward, backward, grad_sync


@pytest.mark.long
def test_fsdp2_zero3_20_steps_judged(tmp_path):
    check_judged_pass(record(tmp_path, "fsdp2", steps=20), 20, 3, 3)


@pytest.mark.long
def test_fsdp2_zero2_20_steps_judged(tmp_path):
    out = record(tmp_path, "fsdp2", "--zero", "2", steps=20)
    traced = {(t["op"], t["phase"]) for r in (0, 1) for t in jsonl(os.path.join(out, "trace", f"rank-{r:05d}.jsonl"))}
    assert ("all_gather", "forward") in traced and ("all_gather", "backward") not in traced  # kept after forward
    check_judged_pass(out, 20, 0, 2)  # forward, grad_sync


@pytest.mark.long
def test_fsdp2_traffic_catches_gathers_the_units_do_not_run(tmp_path):
    """ZeRO-3 whose resharding is turned off after Recorder.attach recorded its units (FSDP2's
    set_reshard_after_forward at run time): every view of the math passes, and the traffic view FAILs at step 0,
    backward, on the dp group: nothing traced where the recorded units all-gather again."""
    out = record(tmp_path, "fsdp2", "--keep-after-attach", steps=2)
    judged, gate = judge(out)
    rows = judged_rows(judged, gate)
    assert judged.returncode == 1 and not rows[TRAFFIC]["passed"], judged.stdout
    assert rows["gradients equal the engine's single-device gradient at every step"]["passed"]
    with open(os.path.join(out, "judge", "first_divergence.json")) as f:
        doc = json.load(f)
    first = doc["first"]
    assert (first["view"], first["step"], first["phase"], first["tensor"]) == \
        ("traffic", 0, "backward", "dp[tp0.pp0]"), doc
    assert doc["pattern"].startswith("nothing traced where the model has traffic"), doc


def is_embedding_grad(r):
    return r["kind"] == "tensor" and r["step"] == 0 and r["phase"] == "grad" and \
        r["tensor"] == "model.embed_tokens.weight"


def check_boxes_refused(out, tmp_path):
    """Box records edited as a person would (the seal recomputed) are refused by name, exit 2: a box shifted onto
    its neighbour's rows (two ranks hold rows 42..43, nobody the last), a box past the tensor, a negative size."""
    def shift(r):
        r["shard"]["offsets"][0] -= 1

    refused(edited_records(out, str(tmp_path / "overlap"), 1, is_embedding_grad, shift),
            "step 0 grad model.embed_tokens.weight: logical elements [2688, 2752) (from row 42, column 0) are in "
            "two pieces: rank 0's box [0, 0]+[43, 64] and rank 1's box [42, 0]+[43, 64]")

    def past(r):
        r["shard"]["offsets"][0] += 1

    refused(edited_records(out, str(tmp_path / "past"), 2, is_embedding_grad, past),
            "records/rank-00002.jsonl:", "record.shard = {\"offsets\":[87,0],\"sizes\":[42,64]}: dim 0 spans "
            "[87, 129), outside the tensor's 128 rows (shape (128, 64))", "hint:")

    def negative(r):
        r["shard"]["sizes"][1] = -64

    refused(edited_records(out, str(tmp_path / "negative"), 2, is_embedding_grad, negative),
            "dim 1 has size -64: a box's offsets and sizes are not negative")


@pytest.mark.long
def test_fsdp2_zero3_uneven_shards_judged(tmp_path):
    """ZeRO-3 on 3 ranks: torch.chunk's uneven rows, recorded as {"offsets", "sizes"} boxes, judged PASS with every
    view compared (FSDP2's units padded to the first chunk in the traffic model); edited boxes refused by name."""
    out = record(tmp_path, "fsdp2", "--world", "3", "--micro-batches", "3")
    contract, ops = check_recording(out, 3, 3, 3, 1, micro_batches=3)
    assert {("dp", "all_gather", "forward"), ("dp", "all_gather", "backward"),
            ("dp", "reduce_scatter", "grad_sync")} <= ops
    recs = jsonl(os.path.join(out, "records", "rank-00002.jsonl"))
    emb = next(r for r in recs if r["kind"] == "tensor" and r["tensor"] == "model.embed_tokens.weight")
    assert emb["shard"] == {"offsets": [86, 0], "sizes": [42, 64]}  # 128 rows in 3: 43, 43, 42
    check_judged_pass(out, 2, 3, 3)
    check_boxes_refused(out, tmp_path)


@pytest.mark.long
def test_fsdp2_with_tensor_parallel_2x2_judged(tmp_path):
    """FSDP2 + DTensor TP on a 2 x 2 mesh: 2-D boxes (a row-parallel matrix cut in columns by tp and in rows by dp)
    read, every view compared and passed: PASS, exit 0. The traffic view models both axes from the recording: the
    contract's tp_plan "dtensor" (ColwiseParallel q/k/v/gate/up: each input gradient all-reduced in backward;
    RowwiseParallel o/down: each output all-reduced in forward) and FSDP2's units gathering and reducing tp-local
    shards (each tensor's tp split told from the pieces of ranks that differ in tp alone): 20 cells of 2 steps
    equal, as many ops as the model (344)."""
    out = record(tmp_path, "fsdp2", "--world", "4", "--tp", "2")
    contract, ops = check_recording(out, 4, 3, 2, 2)
    assert contract["strategy"]["tp_plan"] == "dtensor", contract["strategy"]
    assert {("tp", "all_reduce", "forward"), ("tp", "all_reduce", "backward"),
            ("dp", "reduce_scatter", "grad_sync")} <= ops
    judged, gate = judge(out)
    rows = judged_rows(judged, gate)
    assert judged.returncode == 0 and gate["verdict"] == "PASS", judged.stdout + judged.stderr
    assert all(c["passed"] for c in rows.values()), rows
    assert "2 of 2 steps replayed, 42 tensors, 42 bitwise" in \
        rows["update equals the engine's AdamW replay at every step"]["measured"]
    assert rows[TRAFFIC]["measured"].startswith(
        "20 cells of 2 steps equal (dp: FSDP2's schedule of 3 fully_shard units, 3 resharded after forward) "
        "(embedding whole, head whole); ops 344 traced, 344 in the model"), rows[TRAFFIC]


@pytest.mark.long
def test_dtensor_tensor_parallel_alone_judged(tmp_path):
    """DTensor TP alone (no FSDP2) on 2 ranks: PASS, exit 0, its traffic compared on DTensor's plan — per micro-batch
    4 forward all-reduces (o_proj, down_proj outputs) and 10 backward ones (q, k, v, gate, up input gradients), where
    the engine's Megatron split would all-reduce a block's input gradients once per sum (the FAIL this run had before
    the contract declared tp_plan)."""
    out = record(tmp_path, "fsdp2", "--world", "2", "--tp", "2", "--zero", "0")
    contract, _ = check_recording(out, 2, 0, 1, 2)
    assert contract["strategy"]["tp_plan"] == "dtensor", contract["strategy"]
    judged, gate = judge(out)
    rows = judged_rows(judged, gate)
    assert judged.returncode == 0 and gate["verdict"] == "PASS", judged.stdout + judged.stderr
    assert rows[TRAFFIC]["measured"].startswith(
        "4 cells of 2 steps equal (embedding whole, head whole); ops 224 traced, 224 in the model"), rows[TRAFFIC]
