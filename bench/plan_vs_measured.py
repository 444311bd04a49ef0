#!/usr/bin/env python3
"""Predicted against measured step time on this machine (docs/plan.md §10).

Calibrates this host (`plan calibrate`, unless --cluster names a file), runs `shardproof compare` on a
preset with strategies of at most `devices` ranks (one rank per core), then plans each run exactly
(`plan --run DIR --cluster this-host`) and prints the predicted step time next to the measured median
(steps >= 1; step 0 includes one-time warm-up) with the relative error. A figure, not a test: the
measured times depend on the machine's load, so run it on a quiet machine and quote the CPU flags.

usage: plan_vs_measured.py --bin build/bin/shardproof [--preset tiny] [--strategies dp2,tp2,pp2-1f1b]
"""
import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--strategies", default="dp2,tp2,pp2-1f1b,pp2-gpipe,zero1-dp2")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--cluster", default="", help="a cluster file (default: calibrate this-host first)")
    ap.add_argument("--efficiency", type=float, default=1.0,
                    help="fraction of the calibrated sgemm rate the model's GEMMs reach (default 1.0: "
                         "calibration measured the same kernel)")
    ap.add_argument("--work", default="")
    a = ap.parse_args()
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="plan-vs-measured-"))
    cluster = a.cluster
    if not cluster:
        cluster = str(work / "this-host.toml")
        subprocess.run([a.bin, "plan", "calibrate", "--np", "2", "--out", cluster], check=True)
    out = work / "compare"
    subprocess.run([a.bin, "compare", "--preset", a.preset, "--strategies", a.strategies, "--out", str(out),
                    "--set", f"train.steps={a.steps}", "--set", "train.eval_every=0", "--set",
                    "evidence.checksum_every=0"], check=True, stdout=subprocess.DEVNULL)
    rows = json.loads((out / "compare.json").read_text())["rows"]
    print(f"| strategy | measured step s (median of steps 1..{a.steps - 1}) | predicted s | error | "
          "predicted GEMM s | predicted comm in passes s | after pipeline s | bubble |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        run = pathlib.Path(r["dir"])
        steps = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
        measured = statistics.median(s["step_s"] for s in steps if s.get("step", -1) >= 1 and "step_s" in s)
        contract = json.loads((run / "contract.json").read_text())
        p = subprocess.run([a.bin, "plan", "--cluster", cluster, "--run", str(run), "--json", "--efficiency",
                            str(a.efficiency)], capture_output=True, text=True)
        if p.returncode != 0:
            print(f"| {r['label']} | {measured:.4g} | (not planned: {p.stderr.strip().splitlines()[0]}) | | | | | |")
            continue
        j = json.loads(p.stdout)
        st = j["step"]
        err = (st["seconds"] - measured) / measured
        print(f"| {r['label']} (world {contract['world_size']}) | {measured:.4g} | {st['seconds']:.4g} | {100 * err:+.0f} % | "
              f"{st['compute_seconds']:.4g} | {st['pass_comm_seconds']:.4g} | {st['after_pipeline_seconds']:.4g} | "
              f"{100 * j['pipeline']['bubble_fraction']:.0f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
