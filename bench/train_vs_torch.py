"""Benchmark: one training step of shardproof vs PyTorch eager on the same shapes, same run, 1 thread.

For each preset (tiny: batch 8 x seq 128; small: batch 4 x seq 256, as in
shared/reference/published-numbers.md) it runs step_bench (shardproof: forward, backward, exact-norm
clipping, AdamW; evidence off) and a plain PyTorch eager LLaMA (tests/oracle/llama_torch.py math) with
torch.optim.AdamW and clip_grad_norm_, alternating the two so that machine noise hits both, and
reports the medians, the ratio and achieved GFLOP/s as a fraction of the sgemm peak measured in the
same run. PyTorch (Debian's, on the same OpenBLAS) runs the OpenBLAS core shardproof selects (its
--version; docs/performance.md §"The OpenBLAS core"), unless OPENBLAS_CORETYPE is already set: both sides
use the same kernels. Usage: train_vs_torch.py BUILD_DIR [--steps N] [--rounds R]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))

SHAPES = {"tiny": (8, 128), "small": (4, 256)}


def torch_step_tps(preset, steps):
    import torch
    import tomllib
    import llama_torch as L
    torch.set_num_threads(1)
    cfg = tomllib.load(open(os.path.join(ROOT, "configs", preset + ".toml"), "rb"))
    m = dict(cfg["model"])
    m["vocab_size"] = cfg["data"]["vocab_size"]
    B, T = SHAPES[preset]
    w = {k: v.requires_grad_(True) for k, v in L.random_weights(m, 1).items()}
    opt = torch.optim.AdamW(list(w.values()), lr=1e-3, foreach=False)
    g = torch.Generator().manual_seed(0)
    times = []
    for s in range(steps + 1):
        tok = torch.randint(0, m["vocab_size"], (B, T + 1), generator=g)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = L.forward_loss(m, w, tok)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), 1.0)
        opt.step()
        if s > 0:
            times.append(time.perf_counter() - t0)
    times.sort()
    return B * T / times[len(times) // 2]


def ours(build, preset, steps, extra=()):
    B, T = SHAPES[preset]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = subprocess.run([os.path.join(build, "bench", "step_bench"), os.path.join(ROOT, "configs", preset + ".toml"),
                          str(B), str(T), str(steps), *extra], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def engine_blas_core(build):
    """The OpenBLAS core shardproof runs on this host ('blas core:' of its --version), or None."""
    out = subprocess.run([os.path.join(build, "bin", "shardproof"), "--version"], capture_output=True, text=True)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("blas core:")), None)
    return line.split()[2] if line else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    # Before torch is imported (OpenBLAS reads the variable when it loads): the engine's core for PyTorch too.
    core = os.environ.get("OPENBLAS_CORETYPE") or engine_blas_core(args.build)
    if core:
        os.environ["OPENBLAS_CORETYPE"] = core
    rows = []
    for preset in ("tiny", "small"):
        sp, tp = [], []
        for _ in range(args.rounds):
            sp.append(ours(args.build, preset, args.steps))
            tp.append(torch_step_tps(preset, args.steps))
        r = sorted(sp, key=lambda x: x["tokens_per_s"])[len(sp) // 2]
        t = sorted(tp)[len(tp) // 2]
        rows.append((preset, r, t))
    print(f"OpenBLAS core: shardproof {rows[0][1].get('blas_core', '?')}, PyTorch {core or 'its own choice'}")
    print("| preset | params | shardproof tok/s | PyTorch tok/s | ratio | GFLOP/s | sgemm peak | % of peak |")
    print("|---|---|---|---|---|---|---|---|")
    for preset, r, t in rows:
        print(f"| {preset} | {r['params']/1e6:.1f}M | {r['tokens_per_s']:.0f} | {t:.0f} | {r['tokens_per_s']/t:.2f} | "
              f"{r['gflops']:.1f} | {r['sgemm_gflops']:.1f} | {100*r['gflops']/r['sgemm_gflops']:.0f}% |")


if __name__ == "__main__":
    main()
