#!/usr/bin/env python3
"""Where the time goes (docs/performance.md §"Where the time goes", docs/formats/timeline.md): trains a preset at each
strategy and precision and prints, per rank, the mean split of the steps >= 1 (step 0 includes one-time warm-up)
read from the run's timeline/ split lines: GEMMs, attention, the other memory-bound kernels, communication,
waiting, optimizer, evidence and the rest, in ms and as shares of the step. A figure, not a test: the table
starts with the CPU, its flags and the load average before and after, which move every wall-clock figure.

usage: time_split.py --bin build/bin/shardproof [--preset small] [--precisions fp32,bf16]
                     [--strategies dp1,dp2,tp2,pp2] [--steps 4] [--work DIR]
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import tempfile

from bench_host import cpu, load

KINDS = ["gemm", "attention", "memory_bound", "comm", "wait", "optimizer", "evidence", "other"]
STRATEGIES = {"dp1": [], "dp2": ["parallel.dp=2"], "tp2": ["parallel.tp=2"], "pp2": ["parallel.pp=2"]}


def splits(run_dir):
    """world rank -> mean over the steps >= 1 of (step_us, {kind: us})."""
    out = {}
    for f in sorted((run_dir / "timeline").glob("rank-*.jsonl")):
        rank = int(re.search(r"rank-(\d+)", f.name).group(1))
        lines = [json.loads(x) for x in f.read_text().splitlines() if x.strip()]
        lines = [x for x in lines if "split_us" in x]
        used = [x for x in lines if x["step"] >= 1] or lines
        out[rank] = (sum(x["step_us"] for x in used) / len(used),
                     {k: sum(x["split_us"][k] for x in used) / len(used) for k in KINDS})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--strategies", default="dp1,dp2,tp2,pp2")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--work", default="")
    a = ap.parse_args()
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="time-split-"))
    work.mkdir(parents=True, exist_ok=True)
    model, flags = cpu()
    print(f"CPU: {model}, {os.cpu_count()} CPUs; flags: {' '.join(flags)}")
    print(f"load average at the start: {load()}")
    rows = []
    for precision in a.precisions.split(","):
        for strategy in a.strategies.split(","):
            out = work / f"{strategy}-{precision}"
            sets = [f"train.steps={a.steps}", "train.eval_every=0", f"train.precision={precision}"] + STRATEGIES[strategy]
            np_ = 1 if strategy == "dp1" else 2
            cmd = [a.bin, "train", "--preset", a.preset, "--out", str(out), "--overwrite", "--quiet"]
            cmd += ["--np", str(np_)] if np_ > 1 else []
            for s in sets:
                cmd += ["--set", s]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            for rank, (step_us, parts) in sorted(splits(out).items()):
                rows.append((strategy, precision, rank, step_us, parts))
    print(f"load average at the end: {load()}")
    print()
    print("| strategy | precision | rank | step ms | " + " | ".join(KINDS) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(KINDS))
    for strategy, precision, rank, step_us, parts in rows:
        cells = [f"{parts[k] / 1000:.0f} ({100 * parts[k] / step_us:.1f} %)" for k in KINDS]
        print(f"| {strategy} | {precision} | {rank} | {step_us / 1000:.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
