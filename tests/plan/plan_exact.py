#!/usr/bin/env python3
"""The planner is the engine's own model: `shardproof plan --run DIR` against what DIR's run measured.

For every run directory under the given roots (the parity suite's and compare.table's bundles), the plan of
exactly that run, placed on a one-node cluster with one device per rank, must give
  - memory: per rank and category, the peak bytes the run's ledger measured (ledger.json measured_peak);
  - traffic: per rank, group and phase, the ops and bytes the run's trace recorded in one training step
    (the forward, backward, grad_sync and optimizer phases; the evidence and eval phases depend on the
    step's class and are checked by every run's own trace check against comm_predicted.json).
Equality, not a tolerance. Parameter-server runs are skipped: `plan` places all-reduce strategies only.

usage: plan_exact.py --bin shardproof --work DIR ROOT [ROOT...]
"""
import argparse
import json
import pathlib
import subprocess
import sys
from collections import defaultdict

PHASES = ("forward", "backward", "grad_sync", "optimizer")


def cluster_file(path, devices):
    path.write_text(f'''name = "exact-{devices}"
description = "one node with one device per rank of the run (plan_exact.py)"
sources = ["a test fixture: only the device count matters for memory and bytes"]

[nodes]
count = 1
devices_per_node = {devices}

[device]
model = "test device"
memory_gib = 64

[device.peak_tflops]
fp32 = 1

[intra_node]
kind = "shm"
bandwidth_gbytes_per_s = 1
latency_us = 1

[placement]
axis_order = "tp-dp-pp"
''')


def traced(run, rank, step):
    out = defaultdict(lambda: [0, 0])
    for line in (run / "trace" / f"rank-{rank:05d}.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("step") == step and r["phase"] in PHASES:
            cell = out[(r["group"], r["phase"])]
            cell[0] += 1
            cell[1] += r["bytes"]
    return {k: tuple(v) for k, v in out.items()}


def check(bin_, work, run):
    contract = json.loads((run / "contract.json").read_text())
    if contract["config"]["parallel"].get("architecture", "allreduce") != "allreduce":
        return None
    world = contract["world_size"]
    cluster = work / f"cluster-{world}.toml"
    cluster_file(cluster, world)
    p = subprocess.run([bin_, "plan", "--cluster", str(cluster), "--run", str(run), "--all-ranks", "--json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return [f"plan exited {p.returncode}: {p.stderr.strip()}"]
    plan = json.loads(p.stdout)
    ledger = json.loads((run / "ledger.json").read_text())
    errors = []
    ranks = {r["rank"]: r for r in plan["memory"]["ranks"]}
    if sorted(ranks) != list(range(world)):
        errors.append(f"plan evaluated ranks {sorted(ranks)}, the run had {world}")
    for measured in ledger["ranks"]:
        r = measured["rank"]
        for cat, v in measured["categories"].items():
            got = ranks[r]["by_category"][cat]
            if got != v["measured_peak"]:
                errors.append(f"rank {r} memory {cat}: plan {got} B, ledger measured {v['measured_peak']} B")
    step = min(1, contract["config"]["train"]["steps"] - 1)
    compared = 0
    for r in range(world):
        want = traced(run, r, step)
        got = {(g, ph): (c["ops"], c["bytes"]) for g, phases in ranks[r]["traffic"].items()
               for ph, c in phases.items() if ph in PHASES}
        for key in sorted(set(want) | set(got)):
            compared += 1
            if want.get(key) != got.get(key):
                errors.append(f"rank {r} {key[0]} {key[1]} step {step}: plan (ops, bytes) {got.get(key)}, "
                              f"trace {want.get(key)}")
    return errors, compared


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--min-runs", type=int, default=1)
    ap.add_argument("roots", nargs="+")
    a = ap.parse_args()
    work = pathlib.Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    runs = sorted({p.parent for root in a.roots for p in pathlib.Path(root).glob("**/contract.json")
                   if (p.parent / "ledger.json").exists() and (p.parent / "trace").is_dir()})
    checked, skipped, failures = 0, 0, 0
    for run in runs:
        res = check(a.bin, work, run)
        if res is None:
            skipped += 1
            print(f"skip {run}: parameter server")
            continue
        errors, compared = res if isinstance(res, tuple) else (res, 0)
        checked += 1
        if errors:
            failures += 1
            print(f"FAIL {run}:")
            for e in errors[:20]:
                print(f"  {e}")
        else:
            print(f"ok   {run}: memory of every rank and category, {compared} (rank, group, phase) traffic cells")
    print(f"{checked} runs checked, {skipped} skipped, {failures} failed")
    if checked < a.min_runs:
        print(f"FAIL: only {checked} runs found under {a.roots} (expected at least {a.min_runs})")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
