#!/usr/bin/env python3
"""What the evidence costs a training step, read in instructions (issue 48 item 5; docs/performance.md §"Evidence
cost in instructions"): wall time on a shared machine moves by more than the few per cent the evidence costs
(an A/A control of two runs of one binary read −0.6 % [−22.9, +0.6] on the AMD EPYC), while the instructions a step
executes do not depend on the neighbours.

Each variant runs bench/step_bench under valgrind's callgrind with collection on only inside the engine's step
(`--toggle-collect=sp::parallel::Engine::step*`), twice: for S1 and for S2 > S1 measured steps, so that the
difference divided by S2 − S1 is the instructions of one steady step (the warm-up step, with oneDNN's JIT code
generation and first touches, cancels). Variants, in rotated order per round:

  off       evidence off (as `sp fp32` of train_vs_torch.py)
  on        checksums every step and the collective trace (as `sp fp32 evidence`)
  off again the first variant once more: the A/A control, what two measurements of one configuration differ by

Cost = Ir(on) / Ir(off) − 1 per round; the A/A control = Ir(off again) / Ir(off) − 1. The table gives both with
the instructions per step.

What it does not measure: time. An instruction of an XXH3 digest or an exact sum does not cost what an instruction
of an sgemm does (the GEMMs retire 16-wide FMAs at a high rate, the digests run at memory bandwidth), and valgrind
presents the program a CPU without AVX-512, so OpenBLAS, oneDNN and the engine's checksum lanes run their AVX2 code
paths under it. Read the figure as the evidence's share of the work, on an AVX2 code path; the time split of
step_bench (the evidence and optimizer kinds) and the `--alternate` CPU-time pairs are the time-side figures.

usage: evidence_cost.py BUILD_DIR [--preset tiny] [--steps 1,3] [--rounds 2] [--set KEY=VALUE ...]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {"tiny": (8, 128), "small": (4, 256)}
ONE_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def instructions(build, preset, steps, extra, work):
    """Ir collected inside Engine::step for a step_bench of `steps` measured steps (plus its warm-up step)."""
    B, T = SHAPES[preset]
    out = tempfile.mktemp(dir=work, prefix="callgrind.")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", "--toggle-collect=sp::parallel::Engine::step*",
           os.path.join(build, "bench", "step_bench"), os.path.join(ROOT, "configs", preset + ".toml"), str(B), str(T),
           str(steps), *extra]
    if "--trace" in extra:
        cmd[cmd.index("--trace") + 1] = tempfile.mkdtemp(dir=work)
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **ONE_THREAD))
    if p.returncode != 0:
        sys.exit(f"evidence_cost: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr[-3000:]}")
    text = open(out).read()
    m = re.search(r"^(?:summary|totals):\s+(\d+)", text, re.M)
    if not m:
        sys.exit(f"evidence_cost: no instruction total in {out}")
    os.remove(out)
    return int(m.group(1))


def per_step(build, preset, s1, s2, extra, work):
    return (instructions(build, preset, s2, extra, work) - instructions(build, preset, s1, extra, work)) / (s2 - s1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--preset", default="tiny", choices=sorted(SHAPES))
    ap.add_argument("--steps", default="1,3", help="S1,S2: the two step counts whose difference is measured")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], help="a step_bench override, e.g. train.precision=bf16")
    a = ap.parse_args()
    s1, s2 = (int(x) for x in a.steps.split(","))
    # The fp32 backend pinned: `auto` would run its probe under valgrind (valgrind's CPU is another host key, and
    # the probe, measured at valgrind's pace, holds the pick cache's lock for many minutes, so every other run on
    # the machine waits on it).
    if not any(kv.startswith("train.gemm32=") for kv in a.set):
        a.set.append("train.gemm32=openblas")
    sets = [x for kv in a.set for x in ("--set", kv)]
    variants = {"off": sets, "on": sets + ["--checksums", "--trace", "DIR"], "off again": sets}
    work = tempfile.mkdtemp(prefix="evidence-cost-")
    load0 = open("/proc/loadavg").read().split()[0]
    rounds = []
    names = list(variants)
    for r in range(a.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        rounds.append({n: per_step(a.build, a.preset, s1, s2, variants[n], work) for n in order})
        print(f"round {r + 1}: " + ", ".join(f"{n} {rounds[-1][n]:.4g} Ir/step" for n in names), flush=True)
    print(f"\npreset {a.preset}, batch {' x '.join(map(str, SHAPES[a.preset]))}, {' '.join(a.set) or 'fp32'}; "
          f"instructions of one step = (Ir at {s2} steps − Ir at {s1}) / {s2 - s1}, inside Engine::step; "
          f"load average {load0} -> {open('/proc/loadavg').read().split()[0]} (does not move instruction counts)\n")
    print("| figure | median [min, max] over rounds | per round |")
    print("|---|---|---|")
    for n in names:
        v = [x[n] for x in rounds]
        print(f"| instructions per step, {n} | {statistics.median(v):.5g} | {', '.join(f'{x:.5g}' for x in v)} |")
    pct = lambda x: f"{100 * x:+.2f} %"  # noqa: E731
    for label, num in (("evidence cost (on / off − 1)", "on"), ("A/A control (off again / off − 1)", "off again")):
        v = [x[num] / x["off"] - 1 for x in rounds]
        print(f"| {label} | {pct(statistics.median(v))} [{pct(min(v))}, {pct(max(v))}] | "
              f"{', '.join(pct(x) for x in v)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
