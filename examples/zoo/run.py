#!/usr/bin/env python3
"""The bug zoo's runner: records one entry (a real framework bug, run as shipped or re-planted by plants.py into
the one function its issue names) with its example, judges it with `shardproof judge`, and prints the first
divergence. examples/zoo/README.md is the table; tests/python/test_zoo.py runs every entry.

    .venv/bin/python examples/zoo/run.py pytorch-170862 --out runs/zoo-170862
    .venv/bin/python examples/zoo/run.py --list

Not a replica: each entry runs the framework's own code path (torch's clip_grad_norm_ on FSDP2's DTensor
gradients, torch.distributed.pipelining's GPipe, transformers' Trainer, DeepSpeed's engine), with the plant, where
there is one, patching only the function its issue fixed.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# name -> the issue, where the bug lives, how it is run, and the first divergence the judge must name.
ENTRIES = {
    "pytorch-170862": {
        "issue": "https://github.com/pytorch/pytorch/issues/170862",
        "function": "torch.nn.utils.clip_grad._get_total_norm (re-planted)",
        "example": "fsdp2", "args": ["--torch-clip", "--plant", "pytorch-170862"], "twin": ["--torch-clip"],
        "view": "update", "step": 0, "tensor": "grad_norm",
    },
    "pytorch-149768": {
        "issue": "https://github.com/pytorch/pytorch/issues/149768",
        "function": "torch.nn.utils.clip_grad._clip_grads_with_norm_ (re-planted)",
        "example": "fsdp2", "args": ["--torch-clip", "--plant", "pytorch-149768"], "twin": ["--torch-clip"],
        "view": "update", "step": 0, "tensor": None,
    },
    "pytorch-144352": {
        "issue": "https://github.com/pytorch/pytorch/issues/144352",
        "function": "torch.distributed.pipelining.stage._PipelineStageBase.scale_grads (re-planted: no division)",
        "example": "pipelining", "args": ["--plant", "pytorch-144352"], "twin": [],
        "view": "gradients", "step": 0, "tensor": None,
    },
    "torchtitan-1733": {
        "issue": "https://github.com/pytorch/torchtitan/issues/1733",
        "function": "torch.distributed.pipelining's scale_grads under gradient accumulation (as shipped: each "
                    "schedule call divides everything accumulated so far)",
        "example": "pipelining", "args": ["--accumulate", "2"], "twin": [],
        "view": "gradients", "step": 0, "tensor": None,
    },
    "deepspeed-8224": {
        "issue": "https://github.com/deepspeedai/DeepSpeed/issues/8224",
        "function": "deepspeed.runtime.engine.DeepSpeedEngine.backward (re-planted: the loss left undivided, the "
                    "engine's output hooks dividing only the branch through its forward)",
        "example": "deepspeed", "args": ["--zero", "2", "--module-branch", "--plant", "deepspeed-8224"],
        "twin": ["--zero", "2", "--module-branch"],
        "view": "gradients", "step": 0, "tensor": "model.layers.1.self_attn.k_proj.weight",
    },
    "transformers-34191": {
        "issue": "https://github.com/huggingface/transformers/issues/34191",
        "function": "transformers.Trainer.compute_loss without num_items_in_batch (as shipped, the flag off)",
        "example": "hf_trainer", "args": ["--no-items"], "twin": [],
        "view": "loss", "step": 0, "tensor": "loss",
    },
    "transformers-34242": {
        "issue": "https://github.com/huggingface/transformers/issues/34242",
        "function": "transformers.Trainer._get_num_items_in_batch with average_tokens_across_devices off (as "
                    "shipped, the flag off: each rank divides by its own target count)",
        "example": "hf_trainer", "args": ["--no-average-tokens"], "twin": [],
        "view": "loss", "step": 0, "tensor": "loss",
    },
}


def record(name, out, steps, twin=False, python=sys.executable):
    """Records entry `name` (or, with twin, the same run without the bug) for `steps` steps into `out`."""
    e = ENTRIES[name]
    example = os.path.join(ROOT, "examples", e["example"], "train.py")
    subprocess.run([python, example, "--steps", str(steps), "--out", out, "--quiet",
                    *(e["twin"] if twin else e["args"])], check=True, env=dict(os.environ, HF_HUB_OFFLINE="1"),
                   timeout=3000, capture_output=True)


def losses(out):
    """The recorded loss of every step: Σ loss sums / Σ targets over the ranks' micro-batches."""
    sums = {}
    for f in sorted(os.listdir(os.path.join(out, "records"))):
        with open(os.path.join(out, "records", f)) as fh:
            for line in fh:
                r = json.loads(line)
                if r.get("kind") == "step":
                    s, n = sums.get(r["step"], (0.0, 0))
                    sums[r["step"]] = (s + sum(x["loss_sum"] for x in r["losses"]),
                                       n + sum(x["targets"] for x in r["losses"]))
    return [sums[k][0] / sums[k][1] for k in sorted(sums)]


def loss_gap(bug_out, twin_out):
    """The loss curves of the bug and of its twin: (largest relative difference of a step's loss, the twin's own
    step-to-step noise: the median relative change of its loss from one step to the next)."""
    a, b = losses(bug_out), losses(twin_out)
    gap = max(abs(x - y) / abs(y) for x, y in zip(a, b))
    steps = sorted(abs(b[i + 1] - b[i]) / abs(b[i]) for i in range(len(b) - 1))
    return gap, steps[len(steps) // 2] if steps else 0.0


def run(name, out, steps, binary=None, python=sys.executable):
    """Records entry `name` for `steps` steps into `out` and judges it: (judge's exit code, first_divergence.json)."""
    record(name, out, steps, python=python)
    binary = binary or os.path.join(ROOT, "build", "bin", "shardproof")
    judged = subprocess.run([binary, "judge", out], capture_output=True, text=True, timeout=900)
    with open(os.path.join(out, "judge", "first_divergence.json")) as f:
        return judged.returncode, json.load(f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", nargs="?", choices=sorted(ENTRIES))
    ap.add_argument("--out", default=None, help="the recording's directory (new); default runs/zoo-NAME")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--list", action="store_true", help="list the entries")
    ap.add_argument("--loss-curve", action="store_true",
                    help="also record the twin without the bug and compare the two loss curves over --steps")
    args = ap.parse_args(argv)
    if args.list or args.name is None:
        for n, e in sorted(ENTRIES.items()):
            print(f"{n}: {e['issue']} — {e['function']}; expected first divergence: {e['view']}, step {e['step']}")
        return 0
    out = args.out or os.path.join("runs", f"zoo-{args.name}")
    rc, doc = run(args.name, out, args.steps)
    print(f"judge exit {rc}: {doc['line']}")
    if args.loss_curve:
        record(args.name, out + "-twin", args.steps, twin=True)
        gap, noise = loss_gap(out, out + "-twin")
        print(f"loss curves over {args.steps} steps: largest relative difference {gap:.3g} (the twin's median "
              f"step-to-step change {noise:.3g})")
    return 0 if rc == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
