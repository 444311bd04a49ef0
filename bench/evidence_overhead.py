"""Benchmark: what tracing and checksums cost a training step (issue 4: target <= 3 %), and what the
deterministic reduction costs over MPI's own (target <= 10 %).

For a preset at dp=4 (4 MPI ranks) it runs, interleaved round by round (the order rotated each round)
so that machine noise hits every variant alike: evidence on (trace + checksums every step, the default), evidence off
(evidence.trace=false, evidence.checksum_every=0), trace only, checksums only, and evidence on with
parallel.reduction=fast; each run trains `--steps` steps without eval and the figure is the median
of metrics.jsonl step_s over steps 1.. of all rounds. Because this machine drifts between runs, each
variant is also compared with "off" of the same round (the runs are back to back): the paired figure
is the median over rounds of (median step of the variant / median step of "off" − 1), with its range.
Extra --set options (e.g. train.global_batch=32) apply to every variant; --only on,off runs a subset
("off" is always included).

--cpu adds the CPU time per step, which a host shared with other jobs disturbs far less than the wall
clock: each variant also runs 1 step in the same round, and (CPU of the run of `--steps` steps − CPU of the
1-step run) / (steps − 1) is the CPU time of a step on all ranks together (user + system of every rank,
from the children's rusage; set-up and the first step cancel). Blocking MPI waits spin, so a rank kept
waiting by a slower peer counts too. The header prints the CPU model, its AVX-512/AMX flags, the
OpenBLAS core in use and the load average before and after.
Usage: evidence_overhead.py BUILD_DIR [--preset tiny] [--rounds 3] [--steps 8] [--np 4] [--only v1,v2]
[--cpu] [--set key=value ...]
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile

VARIANTS = {
    "on": [],
    "off": ["evidence.trace=false", "evidence.checksum_every=0"],
    "trace only": ["evidence.checksum_every=0"],
    "checksums only": ["evidence.trace=false"],
    "on, fast reduction": ["parallel.reduction=fast"],
}


def children_cpu():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run(build, preset, np_, steps, sets, out):
    """Median-able step times of steps 1.. and the CPU seconds of the whole job (every rank)."""
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe", "--allow-run-as-root", os.path.join(build, "bin", "shardproof"),
           "train", "--preset", preset, "--out", out, "--set", f"parallel.dp={np_}", "--set", f"train.steps={steps}",
           "--set", "train.eval_every=0"]
    for s in sets:
        cmd += ["--set", s]
    cpu0 = children_cpu()
    subprocess.run(cmd, check=True, capture_output=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    cpu = children_cpu() - cpu0
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    return [r["step_s"] for r in rows if r.get("step", -1) >= 1 and "step_s" in r], cpu


def spread(ratios):
    """Paired ratios minus one as 'median % [min, max]'."""
    return f"{100 * statistics.median(ratios):+.1f} % [{100 * min(ratios):+.1f}, {100 * max(ratios):+.1f}]"


def host_line(build):
    model, flags = "?", set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags = {f for f in line.split(":", 1)[1].split() if f.startswith(("avx512", "amx"))}
    # The core the engine runs, as its --version says (it may differ from OpenBLAS's own choice:
    # docs/performance.md §"The OpenBLAS core").
    version = subprocess.run([os.path.join(build, "bin", "shardproof"), "--version"], capture_output=True,
                             text=True).stdout
    core = next((ln.split(":", 1)[1].strip() for ln in version.splitlines() if ln.startswith("blas core:")), "?")
    return f"{model}, {os.cpu_count()} CPUs; {' '.join(sorted(flags)) or 'no AVX-512/AMX'}; OpenBLAS core {core}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--only", default="")
    ap.add_argument("--cpu", action="store_true")
    a = ap.parse_args()
    names = [k for k in VARIANTS if not a.only or k == "off" or k in a.only.split(",")]
    times = {k: [] for k in names}
    paired = {k: [] for k in names}
    cpu = {k: [] for k in names}
    cpu_paired = {k: [] for k in names}
    load0 = os.getloadavg()
    tmp = tempfile.mkdtemp(prefix="sp-evidence-overhead-")
    try:
        for r in range(a.rounds):
            this_round, this_cpu = {}, {}
            for k in names[r % len(names):] + names[:r % len(names)]:  # rotated: no variant always runs first
                out = os.path.join(tmp, f"{r}-{k.replace(' ', '_').replace(',', '')}")
                steps, cpu_n = run(a.build, a.preset, a.np, a.steps, VARIANTS[k] + a.set, out)
                times[k] += steps
                this_round[k] = statistics.median(steps)
                if a.cpu:  # the same variant for 1 step, right after: set-up and step 0 cancel
                    _, cpu_1 = run(a.build, a.preset, a.np, 1, VARIANTS[k] + a.set, out + "-1")
                    this_cpu[k] = (cpu_n - cpu_1) / (a.steps - 1)
                    cpu[k].append(this_cpu[k])
            for k in names:
                paired[k].append(this_round[k] / this_round["off"] - 1)
                if a.cpu:
                    cpu_paired[k].append(this_cpu[k] / this_cpu["off"] - 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    extra = " ".join("--set " + s for s in a.set)
    print(host_line(a.build))
    print(f"load average (1, 5, 15 min) before {load0[0]:.1f} {load0[1]:.1f} {load0[2]:.1f}, "
          f"after {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"preset {a.preset}, dp={a.np}, {a.rounds} rounds x {a.steps} steps {extra}".rstrip())
    if a.cpu:
        print("| variant | CPU s per step (median) | vs off of the same round: median [min, max] |")
        print("|---|---|---|")
        for k, v in cpu.items():
            print(f"| {k} | {statistics.median(v):.4f} | {spread(cpu_paired[k])} |")
    print("| variant | median step | vs evidence off (pooled) | vs off of the same round: median [min, max] |")
    print("|---|---|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:.4f} s | {100 * (v / med['off'] - 1):+.1f} % | {spread(paired[k])} |")
    if "on" in med and "on, fast reduction" in med:
        print(f"deterministic vs fast reduction (evidence on): {100 * (med['on'] / med['on, fast reduction'] - 1):+.1f} %")


if __name__ == "__main__":
    main()
