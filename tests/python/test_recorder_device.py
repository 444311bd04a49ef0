"""The recorder's device path (staging.py + checksum_device.py, what a CUDA tensor takes) forced on CPU tensors
(SHARDPROOF_DIGEST=device) writes the same recording, byte for byte, as the NumPy path: the worked example
(examples/torch/train_llama.py) recorded both ways under tensor parallelism (column shards), ZeRO-1, and ZeRO-1 in
the anchored form (format 1) with checksums every second step (host copies of written pieces only on the others) gives
identical records, gradients, state, square roots and tokens; only the trace's clock and topology.json's process
ids differ, and the seal that hashes them."""
import os
import subprocess
import sys

import pytest
import torch

from shardproof_torch import checksum, staging

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WORK = os.environ.get("SP_WORK", "/tmp/sp-python")
NOT_COMPARED = ("trace", "seal", "topology.json")  # wall clock, process ids, and the seal of those


def record(name, mode, args):
    out = os.path.join(WORK, "recorder-device", f"{name}-{mode}")
    subprocess.run(["rm", "-rf", out], check=True)
    env = dict(os.environ, SHARDPROOF_DIGEST=mode)
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", "torch", "train_llama.py"), "--steps", "3",
                    "--out", out, "--quiet"] + args, check=True, timeout=600, env=env)
    return out


def files_of(d):
    out = {}
    for base, _, names in os.walk(d):
        for n in names:
            rel = os.path.relpath(os.path.join(base, n), d)
            if rel.split(os.sep)[0] not in NOT_COMPARED:
                with open(os.path.join(base, n), "rb") as f:
                    out[rel] = f.read()
    return out


# tp (column shards) in make test; zero1 and the anchored form in make test-long (python.long.recorder_device).
@pytest.mark.parametrize("name,args", [("tp", ["--strategy", "tp"]),
                                       pytest.param("zero1", ["--strategy", "zero1"], marks=pytest.mark.long),
                                       pytest.param("anchored", ["--strategy", "zero1", "--anchor-every", "2",
                                                                 "--checksum-every", "2"], marks=pytest.mark.long)])
def test_device_path_writes_the_same_recording(name, args):
    numpy_files = files_of(record(name, "numpy", args))
    device_files = files_of(record(name, "device", args))
    assert sorted(device_files) == sorted(numpy_files)
    assert any(k.startswith("records") for k in numpy_files)
    assert any(k.startswith(("grads", "anchors")) for k in numpy_files), sorted(numpy_files)
    differ = [k for k in numpy_files if numpy_files[k] != device_files[k]]
    assert not differ, differ


def test_staged_device_path_on_cpu():
    t = [torch.randn(3, 5), torch.randn(7)]
    s = staging.Staged(t, "device", [True, False])
    p = s.partial(0, 2, 15, checksum.contiguous_indices(2))
    arrays = s.arrays()
    assert arrays[1] is None and arrays[0].tobytes() == t[0].numpy().tobytes()
    assert p().fields() == checksum.partial_of(t[0].view(-1).numpy()[2:], checksum.contiguous_indices(2)).fields()


def test_digest_mode():
    assert staging.digest_mode("device") == "device"
    with pytest.raises(ValueError, match="SHARDPROOF_DIGEST"):
        staging.digest_mode("gpu")
