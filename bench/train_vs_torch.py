"""Benchmark: one paired run of every training-step ratio of issue 28 (docs/performance.md §"One paired run").

Per round, every variant runs once, the order rotated from round to round, so that machine noise hits all of
them; each variant's figure is the median step of its steps >= 1 (step 0 warms up). Single-threaded, one
process per rank, the preset's shapes (tiny: batch 8 x 128; small: batch 4 x 256, as in
shared/reference/published-numbers.md), one micro-batch of the whole batch per rank:

  torch fp32        PyTorch eager fp32 (tests/oracle/llama_torch.py math), AdamW, clip_grad_norm_
  torch bf16        the same under torch.autocast("cpu", torch.bfloat16), fp32 weights and optimizer (AMP)
  sp fp32           bench/step_bench (the Engine at dp = tp = pp = 1), evidence off
  sp fp32 evidence  the same with checksums every step and the collective trace on
  sp fp32 again     sp fp32 a second time in the round: the A/A control, what two runs of one binary differ by
  sp fp32 onednn    sp fp32 with train.gemm32 = onednn (oneDNN's sgemm for every fp32 product)
  sp bf16           train.precision = bf16 (fp32 gradients), evidence off
  sp bf16 grads16   and train.grad_dtype = bf16
  torch ddp2        DistributedDataParallel over gloo, 2 processes, the batch per rank
  sp dp2            `shardproof train` at dp = 2 (mpirun), the batch per rank, evidence off (as DDP has none)
  sp dp2 onednn     and train.gemm32 = onednn

Ratios, each computed within a round and then given as median [min, max] over rounds: sp bf16 / torch bf16,
sp fp32 / torch fp32, evidence cost (sp fp32 / sp fp32 evidence − 1, thread-CPU and wall), bf16 gradients /
fp32 gradients, sp dp2 / torch ddp2, and fp32's model FLOPs per second over the sgemm peak measured in the
same process (step_bench's 1024³ sgemm); bf16's over the 16-bit GEMM backend's peak on the same product, and for
each precision the ceiling: PyTorch's step over the model FLOPs at that peak (what the ratio would be if every
other part of the step cost nothing). Then the core's arithmetic peaks (bench/isa_peak.h: nothing but
independent FMAs, or vdpbf16ps), each GEMM peak as a fraction of them, and the hardware ceiling: PyTorch's step
over the model FLOPs at the arithmetic peak, which no engine on this core can pass. The evidence scopes' share
of the "sp fp32 evidence" step (its time split) is a lower bound of the evidence cost: the gradient digests
run inside the optimizer's norm pass and are counted there. The CPU, its AVX-512/AMX flags, OpenBLAS's core and oneDNN's ISA
head the table. PyTorch (Debian's, on the same OpenBLAS) gets the engine's OpenBLAS core unless
OPENBLAS_CORETYPE is set (docs/performance.md §"The OpenBLAS core").

usage: train_vs_torch.py BUILD_DIR [--preset small] [--steps N] [--rounds R] [--only NAME,NAME]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracle"))

SHAPES = {"tiny": (8, 128), "small": (4, 256)}
DP2 = ("torch ddp2", "sp dp2", "sp dp2 onednn")
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def torch_model(preset):
    import tomllib
    cfg = tomllib.load(open(os.path.join(ROOT, "configs", preset + ".toml"), "rb"))
    m = dict(cfg["model"])
    m["vocab_size"] = cfg["data"]["vocab_size"]
    return m


def torch_steps(preset, steps, autocast):
    """Median seconds of a PyTorch step (zero_grad, forward, backward, clip, AdamW) over steps >= 1."""
    import torch
    import llama_torch as L
    torch.set_num_threads(1)
    m = torch_model(preset)
    B, T = SHAPES[preset]
    w = {k: v.requires_grad_(True) for k, v in L.random_weights(m, 1).items()}
    opt = torch.optim.AdamW(list(w.values()), lr=1e-3, foreach=False)
    g = torch.Generator().manual_seed(0)
    times = []
    for s in range(steps + 1):
        tok = torch.randint(0, m["vocab_size"], (B, T + 1), generator=g)
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss = L.forward_loss(m, w, tok)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), 1.0)
        opt.step()
        if s > 0:
            times.append(time.perf_counter() - t0)
    return {"step_s": statistics.median(times)}


def ddp_worker(rank, world, port, preset, steps, out):
    import torch
    import torch.distributed as dist
    import llama_torch as L
    from torch.nn.parallel import DistributedDataParallel
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    m = torch_model(preset)
    names, weights = zip(*L.random_weights(m, 1).items())

    class Llama(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.params = torch.nn.ParameterList([torch.nn.Parameter(v) for v in weights])

        def forward(self, tok):
            return L.forward_loss(m, dict(zip(names, self.params)), tok)

    model = DistributedDataParallel(Llama())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    B, T = SHAPES[preset]
    g = torch.Generator().manual_seed(rank)
    times = []
    for s in range(steps + 1):
        tok = torch.randint(0, m["vocab_size"], (B, T + 1), generator=g)
        t0 = time.perf_counter()
        opt.zero_grad()
        model(tok).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if s > 0:
            times.append(time.perf_counter() - t0)
    json.dump({"step_s": statistics.median(times)}, open(os.path.join(out, f"rank{rank}.json"), "w"))
    dist.destroy_process_group()


def torch_ddp(preset, steps, work):
    import torch.multiprocessing as mp
    out = tempfile.mkdtemp(dir=work)
    port = 29500 + os.getpid() % 1000
    mp.spawn(ddp_worker, args=(2, port, preset, steps, out), nprocs=2, join=True)
    # A DDP step ends when both ranks have synchronized: the slower rank's median is the step.
    return {"step_s": max(json.load(open(os.path.join(out, f"rank{r}.json")))["step_s"] for r in range(2))}


def step_bench(build, preset, steps, work, *extra):
    B, T = SHAPES[preset]
    cmd = [os.path.join(build, "bench", "step_bench"), os.path.join(ROOT, "configs", preset + ".toml"), str(B), str(T),
           str(steps), *extra]
    if "--trace" in extra:
        cmd[cmd.index("--trace") + 1] = tempfile.mkdtemp(dir=work)
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **ONE_THREAD), check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def shardproof_dp2(build, preset, steps, work, *extra_sets):
    B, T = SHAPES[preset]
    out = tempfile.mkdtemp(dir=work)
    sets = [f"parallel.dp=2", f"train.micro_batch_size={B}", f"train.global_batch={2 * B}", f"train.seq_len={T}",
            f"train.steps={steps + 1}", "train.eval_every=0", "train.eval_batches=0", "evidence.trace=false",
            "evidence.checksum_every=0", "evidence.checkpoint_every=0", *extra_sets]
    cmd = [os.path.join(build, "bin", "shardproof"), "train", "--np", "2", "--preset", preset, "--out", out, "--quiet"]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **ONE_THREAD), check=True)
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    return {"step_s": statistics.median(r["step_s"] for r in rows if r.get("step", -1) >= 1 and "step_s" in r)}


def variants(build, preset, steps, work):
    return {
        "torch fp32": lambda: torch_steps(preset, steps, autocast=False),
        "torch bf16": lambda: torch_steps(preset, steps, autocast=True),
        "sp fp32": lambda: step_bench(build, preset, steps, work),
        "sp fp32 evidence": lambda: step_bench(build, preset, steps, work, "--checksums", "--trace", "DIR"),
        "sp fp32 again": lambda: step_bench(build, preset, steps, work),
        "sp fp32 onednn": lambda: step_bench(build, preset, steps, work, "--set", "train.gemm32=onednn"),
        "sp bf16": lambda: step_bench(build, preset, steps, work, "--set", "train.precision=bf16"),
        "sp bf16 grads16": lambda: step_bench(build, preset, steps, work, "--set", "train.precision=bf16", "--set",
                                              "train.grad_dtype=bf16"),
        "torch ddp2": lambda: torch_ddp(preset, steps, work),
        "sp dp2": lambda: shardproof_dp2(build, preset, steps, work),
        "sp dp2 onednn": lambda: shardproof_dp2(build, preset, steps, work, "train.gemm32=onednn"),
    }


# (name, numerator, denominator, what): the ratio of tokens/s (= inverse ratio of step times) unless noted.
RATIOS = [
    ("sp bf16 / torch bf16", "sp bf16", "torch bf16", "speed"),
    ("sp fp32 / torch fp32", "sp fp32", "torch fp32", "speed"),
    ("evidence cost, wall", "sp fp32 evidence", "sp fp32", "cost"),
    ("evidence cost, thread CPU", "sp fp32 evidence", "sp fp32", "cpu cost"),
    ("A/A control: sp fp32 again / sp fp32, wall", "sp fp32 again", "sp fp32", "cost"),
    ("sp fp32 onednn / torch fp32", "sp fp32 onednn", "torch fp32", "speed"),
    ("sp fp32 onednn / sp fp32", "sp fp32 onednn", "sp fp32", "speed"),
    ("bf16 gradients / fp32 gradients", "sp bf16 grads16", "sp bf16", "speed"),
    ("sp dp2 / torch ddp2", "sp dp2", "torch ddp2", "speed"),
    ("sp dp2 onednn / torch ddp2", "sp dp2 onednn", "torch ddp2", "speed"),
]


def ratio(kind, a, b):
    if kind == "speed":
        return b["step_s"] / a["step_s"]
    if kind == "cost":
        return a["step_s"] / b["step_s"] - 1
    return a["cpu_s"] / b["cpu_s"] - 1


def host_line(build):
    model, flags = "?", set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags = {f for f in line.split(":", 1)[1].split() if f.startswith(("avx512", "amx")) or f in ("avx2", "fma")}
    return f"{model}, {os.cpu_count()} CPUs; {' '.join(sorted(flags))}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--preset", default="small", choices=sorted(SHAPES))
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    args = ap.parse_args()
    version = subprocess.run([os.path.join(args.build, "bin", "shardproof"), "--version"], capture_output=True,
                             text=True).stdout
    engine_core = next((ln.split()[2] for ln in version.splitlines() if ln.startswith("blas core:")), None)
    # Before torch is imported (OpenBLAS reads the variable when it loads): the engine's core for PyTorch too.
    core = os.environ.get("OPENBLAS_CORETYPE") or engine_core
    if core:
        os.environ["OPENBLAS_CORETYPE"] = core
    # One thread for PyTorch too, before torch loads: torch.set_num_threads(1) bounds its OpenMP pool (oneDNN's
    # bf16 products) but not Debian's pthread OpenBLAS, which otherwise runs PyTorch's fp32 products on every
    # core (and each DDP worker's on both), while every shardproof rank runs on one.
    os.environ.update(ONE_THREAD)
    work = tempfile.mkdtemp(prefix="train-vs-torch-")
    table = variants(args.build, args.preset, args.steps, work)
    names = [n for n in table if not args.only or n in args.only.split(",")]
    load0 = open("/proc/loadavg").read().split()[0]
    rounds = []
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        rounds.append({n: table[n]() for n in order})
        print(f"round {r + 1}: " + ", ".join(f"{n} {rounds[-1][n]['step_s']:.3f} s" for n in names), flush=True)
    B, T = SHAPES[args.preset]
    sp = next((x[n] for x in rounds for n in ("sp fp32", "sp bf16") if n in x), {})
    print(f"\nhost: {host_line(args.build)}; load average {load0} -> {open('/proc/loadavg').read().split()[0]}")
    print(f"OpenBLAS core {sp.get('blas_core', engine_core)} (PyTorch: {core or 'its own choice'}); "
          f"oneDNN ISA {sp.get('onednn_isa', '?')}; preset {args.preset}, batch {B} x {T} per rank, "
          f"{args.steps} steps, {args.rounds} rounds\n")
    print("| variant | step s (median over rounds) | tokens/s | per round |")
    print("|---|---|---|---|")
    for n in names:
        s = [x[n]["step_s"] for x in rounds]
        tokens = B * T * (2 if n in DP2 else 1)
        print(f"| {n} | {statistics.median(s):.3f} | {tokens / statistics.median(s):.0f} | "
              f"{', '.join(f'{v:.3f}' for v in s)} |")
    print("\n| ratio | median [min, max] over rounds | per round |")
    print("|---|---|---|")
    for label, a, b, kind in RATIOS:
        if a not in names or b not in names:
            continue
        v = [ratio(kind, x[a], x[b]) for x in rounds]
        fmt = (lambda x: f"{100 * x:+.1f} %") if "cost" in kind else (lambda x: f"{x:.2f}x")
        print(f"| {label} | {fmt(statistics.median(v))} [{fmt(min(v))}, {fmt(max(v))}] | "
              f"{', '.join(fmt(x) for x in v)} |")
    if "sp fp32" in names:
        v = [x["sp fp32"]["gflops"] / x["sp fp32"]["sgemm_gflops"] for x in rounds]
        print(f"| sp fp32 model FLOP/s / sgemm peak (same process) | {100 * statistics.median(v):.0f} % "
              f"[{100 * min(v):.0f}, {100 * max(v):.0f}] | {', '.join(f'{100 * x:.0f} %' for x in v)} |")
    if "sp bf16" in names and rounds[0]["sp bf16"].get("bf16_gemm_gflops", 0) > 0:
        v = [x["sp bf16"]["gflops"] / x["sp bf16"]["bf16_gemm_gflops"] for x in rounds]
        print(f"| sp bf16 model FLOP/s / bf16 GEMM peak (same process) | {100 * statistics.median(v):.0f} % "
              f"[{100 * min(v):.0f}, {100 * max(v):.0f}] | {', '.join(f'{100 * x:.0f} %' for x in v)} |")
    # The ceiling: the speed over PyTorch a step would reach if its model FLOPs ran at the GEMM peak measured in
    # the same process and everything else (attention's softmax, norms, casts, optimizer, evidence) cost nothing.
    for sp_name, torch_name, peak in (("sp fp32", "torch fp32", "sgemm_gflops"),
                                      ("sp bf16", "torch bf16", "bf16_gemm_gflops")):
        if sp_name not in names or torch_name not in names or rounds[0][sp_name].get(peak, 0) <= 0:
            continue
        v = [x[torch_name]["step_s"] / (x[sp_name]["flops_per_token"] * B * T / (x[sp_name][peak] * 1e9))
             for x in rounds]
        print(f"| ceiling of {sp_name} / {torch_name} (model FLOPs at the {peak.split('_')[0]} peak, the rest free) | "
              f"{statistics.median(v):.2f}x [{min(v):.2f}x, {max(v):.2f}x] | {', '.join(f'{x:.2f}x' for x in v)} |")
    hardware_rows(rounds, names, B * T)
    if "sp fp32 evidence" in names:
        v = [x["sp fp32 evidence"]["split_s"]["evidence"] / x["sp fp32 evidence"]["step_s"] for x in rounds]
        print(f"| evidence scopes' share of the sp fp32 evidence step (time split; a lower bound) | "
              f"{100 * statistics.median(v):.1f} % [{100 * min(v):.1f}, {100 * max(v):.1f}] | "
              f"{', '.join(f'{100 * x:.1f} %' for x in v)} |")


def row(label, v, fmt):
    print(f"| {label} | {fmt(statistics.median(v))} [{fmt(min(v))}, {fmt(max(v))}] | {', '.join(fmt(x) for x in v)} |")


def hardware_rows(rounds, names, tokens):
    """The core's arithmetic peaks (step_bench's fp32_fma_peak_gflops, bf16_dot_peak_gflops), the GEMM peaks as a
    fraction of them, and the hardware ceiling of each ratio against PyTorch: its step over the model FLOPs at the
    arithmetic peak (on an AMX host the bf16 GEMM may pass vdpbf16ps, so the larger of the two is the peak)."""
    pct, times = (lambda x: f"{100 * x:.0f} %"), (lambda x: f"{x:.2f}x")
    for sp_name, torch_name, gemm_peak, isa_peak in (("sp fp32", "torch fp32", "sgemm_gflops", "fp32_fma_peak_gflops"),
                                                     ("sp bf16", "torch bf16", "bf16_gemm_gflops",
                                                      "bf16_dot_peak_gflops")):
        if sp_name not in names or rounds[0][sp_name].get(isa_peak, 0) <= 0:
            continue
        x0 = rounds[0][sp_name]
        print(f"| {isa_peak} (the core's, GFLOP/s) | {statistics.median(x[sp_name][isa_peak] for x in rounds):.1f} | |")
        row(f"{gemm_peak} / {isa_peak}", [x[sp_name][gemm_peak] / x[sp_name][isa_peak] for x in rounds], pct)
        if torch_name in names:
            peak = [max(x[sp_name][isa_peak], x[sp_name][gemm_peak]) for x in rounds]
            row(f"hardware ceiling of {sp_name} / {torch_name} (model FLOPs at the core's peak, the rest free)",
                [x[torch_name]["step_s"] / (x0["flops_per_token"] * tokens / (p * 1e9)) for x, p in zip(rounds, peak)],
                times)


if __name__ == "__main__":
    main()
