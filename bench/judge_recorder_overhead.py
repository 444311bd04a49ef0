#!/usr/bin/python3
"""The recorder's cost (docs/judge.md §cost): one DDP step of examples/torch/train_llama.py with
shardproof_torch recording checksums every step and no anchor, against the same loop without the recorder
(--no-record: DDP's own C++ reduction), in paired rounds that alternate the two on the same machine; then the
bytes of one anchor (the state around a step, which the judge replays).

    bench/judge_recorder_overhead.py [--rounds 4] [--steps 8] [--world 2] [--preset bench|test] [--out DIR]

Per run: the median of steps 1.. (step 0 warms up, and DDP reduces it as one bucket); the figure is the ratio
of the two medians of each round, and its median over the rounds. Never a test: timings depend on the machine
and its load, so the figure is reported (docs/performance.md), not asserted.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "torch", "train_llama.py")
PRESETS = {  # the published PyTorch figure's shape (reference/published-numbers.md: 4.2M parameters), and the tests'
    "bench": ["--vocab", "2048", "--dim", "256", "--ffn", "688", "--layers", "4", "--heads", "8", "--kv-heads", "4",
              "--seq", "128", "--micro-batch", "4", "--micro-batches", "4"],
    "test": [],
}


def run(out, steps, world, preset, record, anchor_every):
    timing = out + ".timing.jsonl"
    for p in (out, timing):
        shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else (os.path.exists(p) and os.remove(p))
    cmd = [sys.executable, EXAMPLE, "--strategy", "ddp", "--world", str(world), "--steps", str(steps), "--out", out,
           "--quiet", "--timing", timing, "--anchor-every", str(anchor_every)] + PRESETS[preset]
    if not record:
        cmd.append("--no-record")
    subprocess.run(cmd, check=True)
    rows = [json.loads(line) for line in open(timing)]
    own = [b["recorder_seconds"] - a["recorder_seconds"] for a, b in zip(rows, rows[1:])]
    return statistics.median(r["seconds"] for r in rows[1:]), statistics.median(own) if own else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="bench")
    ap.add_argument("--out", default=None, help="scratch directory (default: a temporary one)")
    a = ap.parse_args()
    work = a.out or tempfile.mkdtemp(prefix="judge-overhead-")
    ratios, off, on, own = [], [], [], []
    for r in range(a.rounds):
        t_off, _ = run(os.path.join(work, "off"), a.steps, a.world, a.preset, False, 0)
        t_on, t_own = run(os.path.join(work, "on"), a.steps, a.world, a.preset, True, 0)
        off.append(t_off)
        on.append(t_on)
        own.append(t_own)
        ratios.append(t_on / t_off)
        print(f"round {r}: step without recorder {t_off * 1e3:.1f} ms, with checksums every step {t_on * 1e3:.1f} ms "
              f"(of which in the recorder's calls on rank 0: {t_own * 1e3:.1f} ms), ratio {t_on / t_off:.3f}", flush=True)
    anchored = os.path.join(work, "anchored")
    run(anchored, 2, a.world, a.preset, True, 1)
    anchor_bytes = [sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
                    for d in (os.path.join(anchored, "anchors", s) for s in sorted(os.listdir(os.path.join(anchored, "anchors"))))]
    print(json.dumps({"preset": a.preset, "world": a.world, "rounds": a.rounds, "steps": a.steps,
                      "median_step_s_without": statistics.median(off), "median_step_s_with": statistics.median(on),
                      "overhead": statistics.median(ratios) - 1,
                      "recorder_s_per_step": statistics.median(own), "ratios": [round(x, 4) for x in ratios],
                      "bytes_per_anchor": anchor_bytes}, indent=1))
    if a.out is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
