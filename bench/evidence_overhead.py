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
("off" is always included). Usage: evidence_overhead.py BUILD_DIR [--preset tiny] [--rounds 3]
[--steps 8] [--np 4] [--only v1,v2] [--set key=value ...]
"""
import argparse
import json
import os
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


def run(build, preset, np_, steps, sets, out):
    cmd = ["mpirun", "-np", str(np_), "--oversubscribe", "--allow-run-as-root", os.path.join(build, "bin", "shardproof"),
           "train", "--preset", preset, "--out", out, "--set", f"parallel.dp={np_}", "--set", f"train.steps={steps}",
           "--set", "train.eval_every=0"]
    for s in sets:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True, capture_output=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    rows = [json.loads(line) for line in open(os.path.join(out, "metrics.jsonl"))]
    return [r["step_s"] for r in rows if r.get("step", -1) >= 1 and "step_s" in r]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    names = [k for k in VARIANTS if not a.only or k == "off" or k in a.only.split(",")]
    times = {k: [] for k in names}
    paired = {k: [] for k in names}
    tmp = tempfile.mkdtemp(prefix="sp-evidence-overhead-")
    try:
        for r in range(a.rounds):
            this_round = {}
            for k in names[r % len(names):] + names[:r % len(names)]:  # rotated: no variant always runs first
                out = os.path.join(tmp, f"{r}-{k.replace(' ', '_').replace(',', '')}")
                steps = run(a.build, a.preset, a.np, a.steps, VARIANTS[k] + a.set, out)
                times[k] += steps
                this_round[k] = statistics.median(steps)
            for k in names:
                paired[k].append(this_round[k] / this_round["off"] - 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    extra = " ".join("--set " + s for s in a.set)
    print(f"preset {a.preset}, dp={a.np}, {a.rounds} rounds x {a.steps} steps {extra}".rstrip())
    print("| variant | median step | vs evidence off (pooled) | vs off of the same round: median [min, max] |")
    print("|---|---|---|---|")
    for k, v in med.items():
        p = paired[k]
        print(f"| {k} | {v:.4f} s | {100 * (v / med['off'] - 1):+.1f} % | {100 * statistics.median(p):+.1f} % "
              f"[{100 * min(p):+.1f}, {100 * max(p):+.1f}] |")
    if "on" in med and "on, fast reduction" in med:
        print(f"deterministic vs fast reduction (evidence on): {100 * (med['on'] / med['on, fast reduction'] - 1):+.1f} %")


if __name__ == "__main__":
    main()
