#!/usr/bin/env python3
"""DP sync overlapped with the backward (docs/performance.md §"DP sync overlapped with the backward"): the step time
of `shardproof train` at dp = 2 and dp = 4 with parallel.overlap_buckets = 0 (each unit's sync blocks at its last
micro-batch) against the overlapped syncs (1, the default, and 2), fp32 and bf16, in paired rounds: each round runs
every variant once, in alternating order, so the machine's noise hits all of them. One micro-batch of B × T per
rank, one BLAS thread per rank, evidence off (no trace, no checksums), median of steps ≥ 1 of each run (step_s of
metrics.jsonl, rank 0), then per variant the median over rounds and the ratio blocking / overlapped per round.
A figure, not a test: the output starts with the CPU, its flags and the load average, which move every figure;
dp = 4 on fewer than 4 cores is oversubscribed (ranks share cores, so an overlap can only hide waiting, not add
compute).

usage: overlap_dp.py --bin build/bin/shardproof [--preset small] [--dps 2,4] [--precisions fp32,bf16]
                     [--overlaps 0,1,2] [--rounds 3] [--steps 4] [--work DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

from bench_host import cpu

SHAPES = {"tiny": (8, 128), "small": (4, 256)}
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def run(args, dp, precision, overlap):
    B, T = SHAPES[args.preset]
    out = tempfile.mkdtemp(dir=args.work)
    sets = [f"parallel.dp={dp}", f"parallel.overlap_buckets={overlap}", f"train.precision={precision}",
            f"train.micro_batch_size={B}", f"train.global_batch={dp * B}", f"train.seq_len={T}",
            f"train.steps={args.steps + 1}", "train.eval_every=0", "train.eval_batches=0", "evidence.trace=false",
            "evidence.checksum_every=0", "evidence.checkpoint_every=0"]
    cmd = [args.bin, "train", "--np", str(dp), "--preset", args.preset, "--out", out, "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **ONE_THREAD), check=True)
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    return statistics.median(r["step_s"] for r in rows if r.get("step", -1) >= 1 and "step_s" in r)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--preset", default="small")
    p.add_argument("--dps", default="2,4")
    p.add_argument("--precisions", default="fp32,bf16")
    p.add_argument("--overlaps", default="0,1,2")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--work", default=None)
    args = p.parse_args()
    args.work = args.work or tempfile.mkdtemp(prefix="overlap_dp_")
    model, flags = cpu()
    print(f"{model}, {os.cpu_count()} cores; flags: {' '.join(flags)}")
    print(f"load average before: {open('/proc/loadavg').read().split()[:3]}", flush=True)
    overlaps = [int(o) for o in args.overlaps.split(",")]
    cells = [(int(d), pr) for d in args.dps.split(",") for pr in args.precisions.split(",")]
    times = {(d, pr, o): [] for d, pr in cells for o in overlaps}
    for r in range(args.rounds):
        for d, pr in cells:
            order = overlaps if r % 2 == 0 else list(reversed(overlaps))
            for o in order:
                times[(d, pr, o)].append(run(args, d, pr, o))
            last = ", ".join(f"overlap {o} {times[(d, pr, o)][-1]:.3f} s" for o in overlaps)
            print(f"round {r + 1} dp{d} {pr}: {last}", flush=True)
    print(f"load average after: {open('/proc/loadavg').read().split()[:3]}")
    print(f"\n| dp | precision | " + " | ".join(f"overlap {o} (s, median)" for o in overlaps) + " | "
          + " | ".join(f"0 / {o} per round" for o in overlaps if o > 0) + " |")
    print("|---" * (2 + len(overlaps) + sum(1 for o in overlaps if o > 0)) + "|")
    for d, pr in cells:
        med = [f"{statistics.median(times[(d, pr, o)]):.3f}" for o in overlaps]
        ratios = []
        for o in overlaps:
            if o > 0:
                rs = [a / b for a, b in zip(times[(d, pr, 0)], times[(d, pr, o)])]
                ratios.append(f"{min(rs):.2f}–{max(rs):.2f}")
        print(f"| {d} | {pr} | " + " | ".join(med) + " | " + " | ".join(ratios) + " |")


if __name__ == "__main__":
    main()
