"""Benchmark: one paired run of every training-step ratio of issue 28 (docs/performance.md §"One paired run").

Per round, every variant runs once, the order rotated from round to round, so that machine noise hits all of
them; each variant's figure is the median step of its steps >= 1 (step 0 warms up). Single-threaded, one
process per rank, the preset's shapes (tiny: batch 8 x 128; small: batch 4 x 256, as in
shared/reference/published-numbers.md), one micro-batch of the whole batch per rank:

  torch fp32        PyTorch eager fp32 (tests/oracle/llama_torch.py math), AdamW, clip_grad_norm_ (Debian's 1.13)
  torch bf16        the same under torch.autocast("cpu", torch.bfloat16), fp32 weights and optimizer (AMP)
  pypi fp32, pypi bf16, pypi ddp2
                    the same on the PyTorch of --torch-python (PyPI's 2.x, its own MKL and oneDNN: the build users
                    have; the project's .venv), when given
  sp fp32           bench/step_bench (the Engine at dp = tp = pp = 1), evidence off, train.gemm32 = "auto" (the
                    host's pick, the default)
  sp fp32 evidence  the same with checksums every step and the collective trace on
  sp fp32 again     sp fp32 a second time in the round: the A/A control, what two runs of one binary differ by
  sp fp32 openblas, sp fp32 onednn
                    sp fp32 with train.gemm32 pinned (one of them is what "auto" picked)
  sp bf16           train.precision = bf16 (fp32 gradients), evidence off
  sp bf16 grads16   and train.grad_dtype = bf16
  torch ddp2        DistributedDataParallel over gloo, 2 processes, the batch per rank
  sp dp2            `shardproof train` at dp = 2 (mpirun), the batch per rank, evidence off (as DDP has none)
  sp dp2 openblas, sp dp2 onednn
                    and train.gemm32 pinned
  ... t2            with --threads 2: the same with 2 threads in one process (PyTorch's intra-op threads and
                    BLAS; the engine's parallel.blas_threads = 2), one rank: a process per node with threads

Every PyTorch variant runs in a process of its own (this script's --worker), so that its thread count is set
before torch loads.

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
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def torch_model(preset):
    import tomllib
    cfg = tomllib.load(open(os.path.join(ROOT, "configs", preset + ".toml"), "rb"))
    m = dict(cfg["model"])
    m["vocab_size"] = cfg["data"]["vocab_size"]
    return m


def torch_steps(preset, steps, autocast, threads=1):
    """Median seconds of a PyTorch step (zero_grad, forward, backward, clip, AdamW) over steps >= 1."""
    import torch
    import llama_torch as L
    torch.set_num_threads(threads)
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
    return {"step_s": statistics.median(times), "torch": torch.__version__}


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
    import torch
    return {"step_s": max(json.load(open(os.path.join(out, f"rank{r}.json")))["step_s"] for r in range(2)),
            "torch": torch.__version__}


def torch_variant(python, kind, preset, steps, work, threads=1):
    """A PyTorch variant ("fp32", "bf16", "ddp2") in a process of its own, `python` running this script's --worker:
    the thread count is in its environment before torch loads (Debian's pthread OpenBLAS reads it once)."""
    n = str(threads)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=n, OMP_NUM_THREADS=n, MKL_NUM_THREADS=n)
    p = subprocess.run([python, os.path.abspath(__file__), "--worker", kind, "--preset", preset, "--steps", str(steps),
                        "--threads", n, "--work", work], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"train_vs_torch: the {kind} worker on {python} exited {p.returncode}:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def worker(a):
    """--worker KIND: one PyTorch variant in this process; prints its JSON."""
    if a.worker == "ddp2":
        r = torch_ddp(a.preset, a.steps, a.work)
    else:
        r = torch_steps(a.preset, a.steps, autocast=a.worker == "bf16", threads=int(a.threads))
    print(json.dumps(r))


def step_bench(build, preset, steps, work, *extra, threads=1):
    B, T = SHAPES[preset]
    cmd = [os.path.join(build, "bench", "step_bench"), os.path.join(ROOT, "configs", preset + ".toml"), str(B), str(T),
           str(steps), *extra, "--set", f"parallel.blas_threads={threads}"]
    if "--trace" in extra:
        cmd[cmd.index("--trace") + 1] = tempfile.mkdtemp(dir=work)
    n = str(threads)
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OPENBLAS_NUM_THREADS=n,
                                                                       OMP_NUM_THREADS=n), check=True)
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


def variants(build, preset, steps, work, torch_python, threads):
    debian = "/usr/bin/python3"
    v = {
        "torch fp32": lambda: torch_variant(debian, "fp32", preset, steps, work),
        "torch bf16": lambda: torch_variant(debian, "bf16", preset, steps, work),
        "sp fp32": lambda: step_bench(build, preset, steps, work),
        "sp fp32 evidence": lambda: step_bench(build, preset, steps, work, "--checksums", "--trace", "DIR"),
        "sp fp32 again": lambda: step_bench(build, preset, steps, work),
        "sp fp32 openblas": lambda: step_bench(build, preset, steps, work, "--set", "train.gemm32=openblas"),
        "sp fp32 onednn": lambda: step_bench(build, preset, steps, work, "--set", "train.gemm32=onednn"),
        "sp bf16": lambda: step_bench(build, preset, steps, work, "--set", "train.precision=bf16"),
        "sp bf16 grads16": lambda: step_bench(build, preset, steps, work, "--set", "train.precision=bf16", "--set",
                                              "train.grad_dtype=bf16"),
        "torch ddp2": lambda: torch_variant(debian, "ddp2", preset, steps, work),
        "sp dp2": lambda: shardproof_dp2(build, preset, steps, work),
        "sp dp2 openblas": lambda: shardproof_dp2(build, preset, steps, work, "train.gemm32=openblas"),
        "sp dp2 onednn": lambda: shardproof_dp2(build, preset, steps, work, "train.gemm32=onednn"),
    }
    if torch_python:
        for kind in ("fp32", "bf16", "ddp2"):
            v[f"pypi {kind}"] = (lambda k: lambda: torch_variant(torch_python, k, preset, steps, work))(kind)
    for t in threads:
        if t == 1:
            continue
        for kind in ("fp32", "bf16"):
            v[f"torch {kind} t{t}"] = (lambda k, t: lambda: torch_variant(debian, k, preset, steps, work, t))(kind, t)
            if torch_python:
                v[f"pypi {kind} t{t}"] = (lambda k, t: lambda: torch_variant(torch_python, k, preset, steps, work,
                                                                             t))(kind, t)
        v[f"sp fp32 t{t}"] = (lambda t: lambda: step_bench(build, preset, steps, work, threads=t))(t)
        v[f"sp bf16 t{t}"] = (lambda t: lambda: step_bench(build, preset, steps, work, "--set", "train.precision=bf16",
                                                           threads=t))(t)
    return v


# (name, numerator, denominator, what): the ratio of tokens/s (= inverse ratio of step times) unless noted.
RATIOS = [
    ("sp bf16 / torch bf16", "sp bf16", "torch bf16", "speed"),
    ("sp fp32 / torch fp32", "sp fp32", "torch fp32", "speed"),
    ("sp bf16 / pypi bf16", "sp bf16", "pypi bf16", "speed"),
    ("sp fp32 / pypi fp32", "sp fp32", "pypi fp32", "speed"),
    ("evidence cost, wall", "sp fp32 evidence", "sp fp32", "cost"),
    ("evidence cost, thread CPU", "sp fp32 evidence", "sp fp32", "cpu cost"),
    ("A/A control: sp fp32 again / sp fp32, wall", "sp fp32 again", "sp fp32", "cost"),
    ("A/A control, thread CPU", "sp fp32 again", "sp fp32", "cpu cost"),
    ("sp fp32 openblas / torch fp32", "sp fp32 openblas", "torch fp32", "speed"),
    ("sp fp32 onednn / torch fp32", "sp fp32 onednn", "torch fp32", "speed"),
    ("sp fp32 onednn / sp fp32 openblas", "sp fp32 onednn", "sp fp32 openblas", "speed"),
    ("bf16 gradients / fp32 gradients", "sp bf16 grads16", "sp bf16", "speed"),
    ("sp dp2 / torch ddp2", "sp dp2", "torch ddp2", "speed"),
    ("sp dp2 / pypi ddp2", "sp dp2", "pypi ddp2", "speed"),
    ("sp dp2 openblas / torch ddp2", "sp dp2 openblas", "torch ddp2", "speed"),
    ("sp dp2 onednn / torch ddp2", "sp dp2 onednn", "torch ddp2", "speed"),
]
for _t in (2, 4, 8):
    RATIOS += [(f"sp fp32 t{_t} / torch fp32 t{_t}", f"sp fp32 t{_t}", f"torch fp32 t{_t}", "speed"),
               (f"sp bf16 t{_t} / torch bf16 t{_t}", f"sp bf16 t{_t}", f"torch bf16 t{_t}", "speed"),
               (f"sp fp32 t{_t} / pypi fp32 t{_t}", f"sp fp32 t{_t}", f"pypi fp32 t{_t}", "speed"),
               (f"sp bf16 t{_t} / pypi bf16 t{_t}", f"sp bf16 t{_t}", f"pypi bf16 t{_t}", "speed"),
               (f"scaling: sp fp32 t{_t} / sp fp32", f"sp fp32 t{_t}", "sp fp32", "speed"),
               (f"scaling: sp bf16 t{_t} / sp bf16", f"sp bf16 t{_t}", "sp bf16", "speed"),
               (f"scaling: torch fp32 t{_t} / torch fp32", f"torch fp32 t{_t}", "torch fp32", "speed")]


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
    ap.add_argument("build", nargs="?", default="", help="the build directory (bench/step_bench, bin/shardproof)")
    ap.add_argument("--preset", default="small", choices=sorted(SHAPES))
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated variant names (default: all)")
    ap.add_argument("--torch-python", default="",
                    help="a second Python whose PyTorch is a peer too (the pypi variants), e.g. .venv/bin/python")
    ap.add_argument("--threads", default="1", help="thread counts per process, e.g. 1,2 (the t2 variants)")
    ap.add_argument("--worker", default="", help=argparse.SUPPRESS)
    ap.add_argument("--work", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:  # a PyTorch variant's own process: it needs no build
        return worker(args)
    if not args.build:
        ap.error("the build directory is required (e.g. build, after make bench or cmake -DSP_BUILD_BENCH=ON)")
    threads = [int(t) for t in args.threads.split(",")]
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
    table = variants(args.build, args.preset, args.steps, work, args.torch_python, threads)
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
    torches = sorted({f"{n.split()[0]}: {x[n]['torch']}" for x in rounds for n in x if "torch" in x[n]})
    print(f"OpenBLAS core {sp.get('blas_core', engine_core)} (Debian's PyTorch: {core or 'its own choice'}); "
          f"oneDNN ISA {sp.get('onednn_isa', '?')}; fp32 GEMM (train.gemm32 = \"auto\") {sp.get('gemm32', '?')}; "
          f"PyTorch {', '.join(torches)}; preset {args.preset}, batch {B} x {T} per rank, {args.steps} steps, "
          f"{args.rounds} rounds\n")
    print("| variant | step s (median over rounds) | tokens/s | per round |")
    print("|---|---|---|---|")
    for n in names:
        s = [x[n]["step_s"] for x in rounds]
        tokens = B * T * (2 if "dp2" in n or "ddp2" in n else 1)
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
    mfu_rows(rounds, names, B * T)


def cores_of(name):
    """The cores a variant's step runs on: 2 for dp2, N for a tN variant, else 1."""
    if "dp2" in name:
        return 2
    last = name.split()[-1]
    return int(last[1:]) if last.startswith("t") and last[1:].isdigit() else 1


def mfu_rows(rounds, names, tokens):
    """MFU: model FLOP/s (the planner's FLOPs per token, planner/flops.h, from step_bench) over the core's measured
    arithmetic peak (bench/isa_peak.h: fp32 FMA for fp32 variants, bf16 dot product for bf16 ones; the larger of it
    and the bf16 GEMM's measured rate on an AMX host) times the cores the variant ran on."""
    sp = next((x[n] for x in rounds for n in names if n.startswith("sp ") and "flops_per_token" in x[n]), None)
    if not sp or sp.get("fp32_fma_peak_gflops", 0) <= 0:
        return
    print("\n| MFU (model FLOP/s over the core's arithmetic peak × cores) | median [min, max] over rounds | per round |")
    print("|---|---|---|")
    flops = sp["flops_per_token"] * tokens
    for n in names:
        bf16 = "bf16" in n
        peak = sp["bf16_dot_peak_gflops"] if bf16 else sp["fp32_fma_peak_gflops"]
        if bf16:
            peak = max(peak, sp.get("bf16_gemm_gflops", 0))
        k = cores_of(n)
        v = [flops * (2 if "dp2" in n else 1) / x[n]["step_s"] / (k * peak * 1e9) for x in rounds]
        row(f"{n} ({'bf16 dot' if bf16 else 'fp32 FMA'} peak {peak:.1f} GFLOP/s × {k})", v,
            lambda x: f"{100 * x:.0f} %")
    print(f"\nmodel FLOPs per token (planner/flops.h): {sp['flops_per_token'] / 1e6:.1f} M")


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
