#!/usr/bin/env python3
"""Predicted against measured step time on this machine (docs/plan.md §10, docs/performance.md).

Calibrates this host (`plan calibrate --np 2`, unless --cluster names a file: GEMM rates per dtype, attention,
the memory-bound kernels' bandwidths and the MPI link), runs `shardproof compare` on a preset for each
precision with strategies of at most 2 ranks (one rank per core), then plans each run exactly
(`plan --run DIR --cluster FILE`, the cluster's measured rates, nothing fitted) and prints the predicted step
time next to the measured median (steps >= 1; step 0 includes one-time warm-up) with the relative error and
the prediction's parts. A figure, not a test: measured times move with the machine's load, so the table
starts with the CPU, its flags and the load average before and after.

usage: plan_vs_measured.py --bin build/bin/shardproof [--preset small] [--precisions fp32,bf16]
                           [--strategies dp1,dp2,tp2,pp2-1f1b,pp2-interleaved] [--steps 6] [--cluster FILE]
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

from bench_host import cpu, load, median_step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--strategies", default="dp1,dp2,tp2,pp2-1f1b,pp2-interleaved")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--cluster", default="", help="a cluster file (default: calibrate this host first)")
    ap.add_argument("--work", default="")
    a = ap.parse_args()
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="plan-vs-measured-"))
    work.mkdir(parents=True, exist_ok=True)
    model, flags = cpu()
    print(f"CPU: {model}, {os.cpu_count()} CPUs; flags: {' '.join(flags)}")
    print(f"load average at the start: {load()}")
    cluster = a.cluster
    if not cluster:
        cluster = str(work / "this-host.toml")
        subprocess.run([a.bin, "plan", "calibrate", "--np", "2", "--out", cluster], check=True,
                       stdout=subprocess.DEVNULL)
    backends = re.findall(r'^(bf16|fp16|fp32) = "(.*)"$', pathlib.Path(cluster).read_text(), re.M)
    print("GEMM backends measured: " + ", ".join(f"{d}: {b}" for d, b in backends))
    print()
    print(f"| precision | strategy | measured s (median of steps 1..{a.steps - 1}) | predicted s | error | "
          "GEMMs s | attention s | memory-bound s | optimizer s | evidence s | comm s | bubble |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for precision in a.precisions.split(","):
        out = work / f"compare-{precision}"
        subprocess.run([a.bin, "compare", "--preset", a.preset, "--strategies", a.strategies, "--out", str(out),
                        "--set", f"train.steps={a.steps}", "--set", "train.eval_every=0", "--set",
                        "evidence.checksum_every=0", "--set", f"train.precision={precision}"],
                       check=True, stdout=subprocess.DEVNULL)
        for r in json.loads((out / "compare.json").read_text())["rows"]:
            run = pathlib.Path(r["dir"])
            measured = median_step(run)
            p = subprocess.run([a.bin, "plan", "--cluster", cluster, "--run", str(run), "--json"],
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(f"| {precision} | {r['label']} | {measured:.4g} | (not planned: "
                      f"{p.stderr.strip().splitlines()[0]}) | | | | | | | | |")
                continue
            j = json.loads(p.stdout)
            st, cp = j["step"], j["compute"]
            err = (st["seconds"] - measured) / measured
            worst = max(worst, abs(err))
            comm = st["pass_comm_seconds"] + st["after_pipeline_seconds"]
            print(f"| {precision} | {r['label']} | {measured:.4g} | {st['seconds']:.4g} | {100 * err:+.1f} % | "
                  f"{cp['gemm_seconds']:.4g} | {cp['attention_seconds']:.4g} | {cp['memory_seconds']:.4g} | "
                  f"{st['optimizer_seconds']:.4g} | {st.get('evidence_seconds', 0):.4g} | {comm:.4g} | {100 * j['pipeline']['bubble_fraction']:.0f} % |")
    print()
    print(f"load average at the end: {load()}; largest |error|: {100 * worst:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
