"""What the precision tests share (test_bf16.py, test_fp16.py): an example run recorded into a temporary folder on
.venv's Python, and its judgement (exit status, gate, rows by name, the per-step lines)."""
import json
import os
import subprocess
import sys

ROOT = os.environ.get("SP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("SP_BIN") or os.path.join(ROOT, "build", "bin", "shardproof")
HF_DDP = os.path.join(ROOT, "examples", "hf_ddp", "train.py")
FSDP2 = os.path.join(ROOT, "examples", "fsdp2", "train.py")


def record(tmp_path, name, steps, *extra, example=HF_DDP):
    """`example` run for `steps` steps (eager attention, quiet) into tmp_path/name; its path."""
    out = str(tmp_path / name)
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    subprocess.run([sys.executable, example, "--steps", str(steps), "--out", out, "--quiet", "--attention", "eager",
                    *extra], check=True, env=env, timeout=900)
    return out


def judge(out):
    """`shardproof judge out`: the finished process, gate.json, and its criteria by name."""
    judged = subprocess.run([BIN, "judge", out], capture_output=True, text=True, timeout=600)
    with open(os.path.join(out, "judge", "gate.json")) as f:
        gate = json.load(f)
    return judged, gate, {c["name"]: c for c in gate["criteria"]}


def steps_lines(out):
    """judge/steps.jsonl: one object per step (its tolerances, ratios, whether GradScaler skipped it)."""
    with open(os.path.join(out, "judge", "steps.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def first_divergence(out):
    with open(os.path.join(out, "judge", "first_divergence.json")) as f:
        return json.load(f)["first"]
