#!/usr/bin/env python3
"""Predicted against measured step time on this machine, whole and per term (docs/plan.md §10, issue 49).

For each fp32 GEMM backend asked (--gemm32: "default" is the host's pick, train.gemm32 = "auto", which the engine runs
unless told otherwise; "other" is the other library, pinned), calibrates this host on that backend (`plan calibrate
--np 2 --gemm32 B --model PRESET`: GEMM rates per dtype, the preset's own GEMM calls, attention, the memory-bound
kernels' bandwidths and the MPI link; the cluster file records the backends it measured), runs `shardproof compare`
on the preset for each precision with strategies of at most 2 ranks (one rank per core) on that backend, then plans
each run exactly (`plan --run DIR --cluster FILE`: the cluster's measured rates, nothing fitted; the planner refuses a
run of another backend) and prints:

  1. the issue's table: the relative error of the predicted step (median of steps >= 1; step 0 warms up) per
     precision and backend (rows) and strategy (columns);
  2. per run, the predicted step and its parts next to the measured one;
  3. per run, per term: the planner's breakdown of the busiest pipeline stage (GEMMs, attention, memory-bound,
     optimizer, evidence, communication, bubble) next to the measured time split of that stage's first rank
     (timeline/rank-*.jsonl split lines: gemm, attention, memory_bound, optimizer, evidence, comm, wait; median of
     steps >= 1), so that a miss is located, not just sized.

A figure, not a test: measured times move with the machine's load, so the output starts with the CPU, its flags and
the load average, and ends with the load average.

usage: plan_vs_measured.py --bin build/bin/shardproof [--preset small] [--precisions fp32,bf16]
                           [--strategies dp1,dp2,tp2,pp2-1f1b,pp2-interleaved] [--steps 6]
                           [--gemm32 default,other] [--work DIR]
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile

from bench_host import cpu, load, median_step

TERMS = [("GEMMs", "gemm"), ("attention", "attention"), ("memory-bound", "memory_bound"), ("optimizer", "optimizer"),
         ("evidence", "evidence"), ("comm", "comm"), ("bubble", "wait")]


def calibrate(a, work, backend):
    path = work / f"this-host-{backend}.toml"
    subprocess.run([a.bin, "plan", "calibrate", "--np", "2", "--gemm32", backend, "--model", a.preset, "--out",
                    str(path)], check=True, stdout=subprocess.DEVNULL)
    text = path.read_text()
    return path, dict(re.findall(r'^(bf16|fp16|fp32) = "(.*)"$', text, re.M))


def measured_split(run, pp_rank):
    """Median over steps >= 1 of the split of the first rank of pipeline stage `pp_rank`, seconds by kind."""
    topo = json.loads((run / "topology.json").read_text())
    rank = min(r["world_rank"] for r in topo["ranks"] if r.get("coords", {}).get("pp") == pp_rank
               and r["coords"].get("dp") == 0 and r["coords"].get("tp") == 0)
    rows = [json.loads(l) for l in (run / "timeline" / f"rank-{rank:05d}.jsonl").read_text().splitlines() if l.strip()]
    splits = [r for r in rows if "split_us" in r and r.get("step", -1) >= 1]
    return {k: statistics.median(s["split_us"].get(k, 0) for s in splits) / 1e6 for _, k in TERMS}


def predicted_terms(j, p):
    """The planner's parts of pipeline stage p, seconds per step."""
    st, cp = j["step"], j["compute"]
    stage = cp["by_pp_rank"][p]
    busy = j["pipeline"]["busy_seconds"][p] if j["pipeline"].get("busy_seconds") else (
        stage["gemm_seconds"] + stage["attention_seconds"] + stage["memory_seconds"] + stage["pass_comm_seconds"])
    return {"gemm": stage["gemm_seconds"], "attention": stage["attention_seconds"],
            "memory_bound": stage["memory_seconds"], "optimizer": st["optimizer_seconds"],
            "evidence": st.get("evidence_seconds", 0),
            "comm": stage["pass_comm_seconds"] + st["after_pipeline_seconds"],
            "wait": max(0.0, j["pipeline"]["simulated_seconds"] - busy)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--strategies", default="dp1,dp2,tp2,pp2-1f1b,pp2-interleaved")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--gemm32", default="default,other", help="fp32 backends: default (the host's pick), other")
    ap.add_argument("--work", default="")
    a = ap.parse_args()
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="plan-vs-measured-"))
    work.mkdir(parents=True, exist_ok=True)
    model, flags = cpu()
    print(f"CPU: {model}, {os.cpu_count()} CPUs; flags: {' '.join(flags)}")
    print(f"load average at the start: {load()}")
    _, picked = calibrate(a, work, "auto")
    default = picked["fp32"].split("-")[0]
    other = "onednn" if default == "openblas" else "openblas"
    print(f"the host's pick (train.gemm32 = \"auto\"): {picked['fp32']}")
    strategies = a.strategies.split(",")
    errors, details, terms = {}, [], []
    for which in a.gemm32.split(","):
        backend = default if which == "default" else other
        cluster, backends = calibrate(a, work, backend)
        print(f"{which} ({backend}): GEMM backends measured: " + ", ".join(f"{d}: {b}" for d, b in backends.items()))
        for precision in a.precisions.split(","):
            out = work / f"compare-{precision}-{backend}"
            sets = [f"train.steps={a.steps}", "train.eval_every=0", "evidence.checksum_every=0",
                    f"train.precision={precision}", f"train.gemm32={backend}"]
            subprocess.run([a.bin, "compare", "--preset", a.preset, "--strategies", a.strategies, "--out", str(out)]
                           + [x for s in sets for x in ("--set", s)], check=True, stdout=subprocess.DEVNULL)
            label = f"{precision} ({which}: {backend})"
            for r in json.loads((out / "compare.json").read_text())["rows"]:
                run = pathlib.Path(r["dir"])
                measured = median_step(run)
                p = subprocess.run([a.bin, "plan", "--cluster", str(cluster), "--run", str(run), "--json"],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    details.append(f"| {label} | {r['label']} | {measured:.4g} | (not planned: "
                                   f"{p.stderr.strip().splitlines()[0]}) | | | | | | | | |")
                    continue
                j = json.loads(p.stdout)
                st, cp = j["step"], j["compute"]
                err = (st["seconds"] - measured) / measured
                errors[(label, r["label"])] = err
                comm = st["pass_comm_seconds"] + st["after_pipeline_seconds"]
                details.append(
                    f"| {label} | {r['label']} | {measured:.4g} | {st['seconds']:.4g} | {100 * err:+.1f} % | "
                    f"{cp['gemm_seconds']:.4g} | {cp['attention_seconds']:.4g} | {cp['memory_seconds']:.4g} | "
                    f"{st['optimizer_seconds']:.4g} | {st.get('evidence_seconds', 0):.4g} | {comm:.4g} | "
                    f"{100 * j['pipeline']['bubble_fraction']:.0f} % |")
                busiest = max(range(len(cp["by_pp_rank"])), key=lambda q: sum(
                    v for k, v in cp["by_pp_rank"][q].items() if k != "pass_comm_seconds"))
                pred, meas = predicted_terms(j, busiest), measured_split(run, busiest)
                cells = " | ".join(f"{pred[k]:.3f} / {meas[k]:.3f}" for _, k in TERMS)
                other_s = measured - sum(meas.values())
                terms.append(f"| {label} | {r['label']} (stage {busiest}) | {cells} | {other_s:.3f} |")
    print()
    print("Relative error of the predicted step, (predicted − measured) / measured:")
    print()
    print("| precision (backend) | " + " | ".join(strategies) + " |")
    print("|---|" + "---|" * len(strategies))
    labels = sorted({k[0] for k in errors}, key=lambda s: (s.split()[0], "default" not in s))
    for label in labels:
        print(f"| {label} | " + " | ".join(f"{100 * errors[(label, s)]:+.1f} %" if (label, s) in errors else "–"
                                          for s in strategies) + " |")
    print()
    print(f"| precision (backend) | strategy | measured s (median of steps 1..{a.steps - 1}) | predicted s | error | "
          "GEMMs s | attention s | memory-bound s | optimizer s | evidence s | comm s | bubble |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(details))
    print()
    print("Per term, the busiest stage: predicted / measured seconds per step (measured: the stage's first rank, "
          "median of steps >= 1; bubble = the pipeline's idle time against the split's wait):")
    print()
    print("| precision (backend) | strategy | " + " | ".join(t for t, _ in TERMS) + " | measured unsplit |")
    print("|---|---|" + "---|" * (len(TERMS) + 1))
    print("\n".join(terms))
    print()
    worst = max((abs(e) for e in errors.values()), default=0.0)
    within = sum(abs(e) <= 0.10 for e in errors.values())
    print(f"load average at the end: {load()}; {within} of {len(errors)} within ±10 %; largest |error| "
          f"{100 * worst:.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
