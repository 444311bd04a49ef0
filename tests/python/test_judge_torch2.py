"""The every-step judge on the .venv's torch 2.x (PyPI's build: MKL's vector sqrt, which is not IEEE's correctly
rounded one): the worked example recorded under ddp and zero1 for 3 steps is judged PASS with every tensor's update
replayed bit for bit — the replay takes torch 2's lerp arithmetic and the square roots the recorder wrote where they
are not the correctly rounded ones (docs/formats/torch_recording.md §sqrt). Planting a wrong root (2 ulp off) makes
the update fail naming it: the recorded roots can only be roundings of the replay's (within 1 ulp)."""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch

from shardproof_torch import declared

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("SP_BIN", os.path.join(ROOT, "build", "bin", "shardproof"))
WORK = os.environ.get("SP_WORK", "/tmp/sp-python")


def record(name, strategy):
    out = os.path.join(WORK, "judge-torch2", name)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out + ".ckpt", ignore_errors=True)
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", "torch", "train_llama.py"), "--strategy", strategy,
                    "--steps", "3", "--out", out, "--quiet"], check=True, timeout=600)
    return out


def judge(d):
    p = subprocess.run([BIN, "judge", d], capture_output=True, text=True, timeout=600)
    with open(os.path.join(d, "judge", "gate.json")) as f:
        return p.returncode, {c["name"].split()[0]: c for c in json.load(f)["criteria"]}


@pytest.mark.parametrize("strategy", ["ddp", "zero1"])
def test_torch2_every_tensor_bitwise(strategy):
    assert int(torch.__version__.split(".")[0]) >= 2, "the .venv's torch is 2.x"
    d = record(strategy, strategy)
    with open(os.path.join(d, "contract.json")) as f:
        c = json.load(f)
    assert c["optimizer"]["arithmetic"] == "torch2-lerp"
    assert c["optimizer"]["sqrt"] == ("correctly-rounded" if declared.sqrt_correctly_rounded() else "recorded")
    rc, rows = judge(d)
    assert rc == 0, rows
    assert "3 of 3 steps replayed, 63 tensors, 63 bitwise" in rows["update"]["measured"], rows["update"]


def test_a_planted_root_is_refused_as_evidence():
    if declared.sqrt_correctly_rounded():
        pytest.skip("this torch's sqrt is correctly rounded: nothing recorded to plant into")
    d = record("planted-root", "ddp")
    rel = "sqrt/step-000001/rank-00000.safetensors"
    path = os.path.join(d, rel)
    raw = bytearray(open(path, "rb").read())
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    name = next(k for k in header if k.startswith("value/"))
    a, _ = header[name]["data_offsets"]
    at = 8 + n + a
    bits = np.frombuffer(bytes(raw[at:at + 4]), np.uint32)[0] + 3  # 2 ulp above the correct root (MKL's is 1 below)
    raw[at:at + 4] = np.array([bits], np.uint32).tobytes()
    open(path, "wb").write(bytes(raw))
    seal_path = os.path.join(d, "seal", "rank-00000.json")
    with open(seal_path) as f:
        seal = json.load(f)
    import hashlib
    seal["files"][rel] = {"bytes": len(raw), "sha256": hashlib.sha256(bytes(raw)).hexdigest()}
    with open(seal_path, "w") as f:
        json.dump(seal, f)
    rc, rows = judge(d)
    assert rc == 1 and not rows["update"]["passed"], rows["update"]
    with open(os.path.join(d, "judge", "first_divergence.json")) as f:
        fd = json.load(f)
    assert fd["first"]["view"] == "update" and fd["first"]["step"] == 1, fd["line"]
    assert "ulp from the correctly rounded" in fd["pattern"], fd["pattern"]
