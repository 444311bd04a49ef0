#!/usr/bin/env python3
"""bf16 against fp32 in the whole engine, in one run (issue 16's benchmark; docs/performance.md).

Trains the same preset for a few steps in each precision (`train.precision`, the GEMM backend `train.gemm16`:
auto, i.e. oneDNN where the CPU has a bf16 instruction, else the widening fallback), on one rank and on dp 2,
and prints per run the median tokens/s over steps >= 1 (step 0 includes one-time warm-up), the ratio to fp32
at the same rank count, the largest peak memory per rank from the ledger (measured = predicted, so it is
exact), and the backend the contract records. A figure, not a test: quote it with the CPU flags (`lscpu`);
only ratios within one run mean anything on a shared machine.

usage: precision_engine.py --bin build/bin/shardproof [--preset small] [--steps 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

RUNS = [("fp32", 1, []), ("bf16", 1, ["train.precision=bf16"]),
        ("bf16, bf16 gradients", 1, ["train.precision=bf16", "train.grad_dtype=bf16"]),
        ("bf16, fallback GEMM", 1, ["train.precision=bf16", "train.gemm16=fallback"]), ("fp32", 2, ["parallel.dp=2"]),
        ("bf16", 2, ["parallel.dp=2", "train.precision=bf16"])]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--work", default="")
    a = ap.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="precision-engine-")
    base = [f"train.steps={a.steps}", "train.eval_every=0", "train.eval_batches=0", "evidence.checkpoint_every=0"]
    rows, fp32 = [], {}
    for i, (name, np, sets) in enumerate(RUNS):
        out = os.path.join(work, f"run{i}")
        cmd = [a.bin, "train", "--preset", a.preset, "--out", out, "--quiet"] + (["--np", str(np)] if np > 1 else [])
        for s in base + sets:
            cmd += ["--set", s]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        metrics = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if '"tokens_per_s"' in l]
        tps = statistics.median(m["tokens_per_s"] for m in metrics if m["step"] >= 1)
        ledger = json.load(open(os.path.join(out, "ledger.json")))
        contract = json.load(open(os.path.join(out, "contract.json")))
        backend = contract.get("engine", {}).get("gemm16", "") if "bf16" in name else "sgemm (OpenBLAS)"
        if name == "fp32":
            fp32[np] = tps
        rows.append((name, np, tps, tps / fp32[np], ledger["max_peak_bytes"], ledger["equal"], backend))
    print(f"\n{a.preset} preset, {a.steps} steps, median over steps >= 1 (one run):")
    print(f"| precision | ranks | tokens/s | x fp32 | peak MiB per rank (ledger) | ledger = prediction | GEMM |")
    print("|---|---:|---:|---:|---:|---|---|")
    for name, np, tps, ratio, peak, equal, backend in rows:
        print(f"| {name} | {np} | {tps:.0f} | {ratio:.2f} | {peak / 2**20:.1f} | {equal} | {backend} |")


if __name__ == "__main__":
    main()
