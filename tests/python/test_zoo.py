"""The bug zoo (examples/zoo): each entry recorded through its framework's own code path (re-planted by
examples/zoo/plants.py into the one function its issue names, or run as shipped) and judged; the test asserts the
first divergence the README's table gives — the view, the step and, where it names one, the tensor — not just the
exit. One entry in `make test`; the rest long."""
import os
import subprocess
import sys

import pytest

ROOT = os.environ.get("SP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("SP_BIN") or os.path.join(ROOT, "build", "bin", "shardproof")
sys.path.insert(0, os.path.join(ROOT, "examples", "zoo"))
import run as zoo  # noqa: E402


def check_entry(tmp_path, name):
    e = zoo.ENTRIES[name]
    rc, doc = zoo.run(name, str(tmp_path / "run"), 2, binary=BIN)
    first = doc["first"]
    assert rc == 1 and doc["verdict"] == "FAIL", doc
    assert (first["view"], first["step"]) == (e["view"], e["step"]), doc["line"]
    if e["tensor"] is not None:
        assert first["tensor"] == e["tensor"], doc["line"]
    return doc


def test_fsdp2_clip_norm_of_the_local_shard(tmp_path):
    doc = check_entry(tmp_path, "pytorch-170862")
    assert doc["first"]["ranks"] == [0, 1] and "the norm of its own pieces only" in doc["pattern"], doc


@pytest.mark.long
def test_pipeline_gradients_not_divided_by_the_micro_batches(tmp_path):
    doc = check_entry(tmp_path, "pytorch-144352")
    assert doc["pattern"].startswith("every tensor's gradient is 4 × the engine's"), doc


@pytest.mark.long
def test_deepspeed_module_branch_left_undivided(tmp_path):
    """DeepSpeed#8224: the twin (the same loop, engine(x) + engine.module(y), no plant) PASSes, so the FAIL is the
    plant's; the loss is right and only its gradient is not (every tensor, both steps)."""
    zoo.record("deepspeed-8224", str(tmp_path / "twin"), 2, twin=True)
    twin = subprocess.run([BIN, "judge", str(tmp_path / "twin")], capture_output=True, text=True, timeout=900)
    assert twin.returncode == 0, twin.stdout[-2000:]
    doc = check_entry(tmp_path, "deepspeed-8224")
    views = {v["view"]: v for v in doc["views"]}
    assert (doc["first"]["tensors_failing"], doc["first"]["steps_failing"]) == (21, 2), doc["line"]
    assert not views["loss"]["found"] and not views["traffic"]["found"], doc


@pytest.mark.long
def test_trainer_tokens_counted_per_rank(tmp_path):
    """transformers#34242: the twin (the Trainer's default, average_tokens_across_devices on) PASSes, so the FAIL is
    the rank-local count's; the loss view names the weight, not the micro-batch mean of #34191."""
    zoo.record("transformers-34242", str(tmp_path / "twin"), 2, twin=True)
    twin = subprocess.run([BIN, "judge", str(tmp_path / "twin")], capture_output=True, text=True, timeout=900)
    assert twin.returncode == 0, twin.stdout[-2000:]
    doc = check_entry(tmp_path, "transformers-34242")
    assert "divided by another count than the global batch's targets" in doc["pattern"], doc
    views = {v["view"]: v for v in doc["views"]}
    assert views["gradients"]["found"] and not views["traffic"]["found"], doc


@pytest.mark.long
@pytest.mark.parametrize("name", sorted(n for n in zoo.ENTRIES if n not in (
    "pytorch-170862", "pytorch-144352", "deepspeed-8224", "transformers-34242")))
def test_entry(tmp_path, name):
    check_entry(tmp_path, name)
