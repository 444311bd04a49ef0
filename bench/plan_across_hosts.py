#!/usr/bin/env python3
"""Predicted against measured step time across hosts (docs/plan.md §10 "Across hosts", docs/cluster.md; issue 47).

Brings up two namespace hosts of this machine (scripts/netns_hosts.sh: each link shaped with tbf to --inter per
direction, 2 slots a host), calibrates them as a cluster (`plan calibrate --np 4` across the hosts: the kernels,
the shared-memory link inside a host and the shaped network between hosts), then runs each strategy of at most 2
ranks (one rank per core) placed within one host or across the two (`OMPI_MCA_rmaps_base_mapping_policy` slot or
node), `--rounds` times, interleaved, and plans each run where its ranks ran (`plan --cluster FILE --run DIR`,
nothing fitted). Prints the measured median step time (the median over rounds of each run's median of steps ≥ 1)
next to the prediction, the error and the predicted communication, then the spread of the rounds. A figure, not a
test: the times move with the machine's load, printed before and after; the hosts are always taken down.

usage: plan_across_hosts.py --bin build/bin/shardproof [--preset tiny] [--inter 300mbit] [--rounds 3]
                            [--cases dp2-across,tp2-within,tp2-across,pp2-across] [--steps 8] [--precision fp32]
                            [--cluster FILE]
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

from bench_host import cpu, load, median_step

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "support"))
import netns_hosts  # noqa: E402

CASES = {  # name: (--set overrides, mpirun mapping policy)
    "dp2-within": (["parallel.dp=2"], "slot"),
    "dp2-across": (["parallel.dp=2"], "node"),
    "tp2-within": (["parallel.tp=2"], "slot"),
    "tp2-across": (["parallel.tp=2"], "node"),
    "pp2-across": (["parallel.pp=2"], "node"),
    "pp2-within": (["parallel.pp=2"], "slot"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--inter", default="300mbit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--cases", default="dp2-across,tp2-within,tp2-across,pp2-across")
    ap.add_argument("--sets", default="", help="extra --set overrides for every run, comma-separated")
    ap.add_argument("--cluster", default="", help="a cluster file calibrated across the same hosts at the same rate "
                    "(default: calibrate first)")
    ap.add_argument("--work", default="")
    a = ap.parse_args()
    why = netns_hosts.unavailable()
    if why:
        sys.exit(f"cannot make namespace hosts here: {why}")
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="plan-across-hosts-"))
    work.mkdir(parents=True, exist_ok=True)
    model, flags = cpu()
    print(f"CPU: {model}, {os.cpu_count()} CPUs; flags: {' '.join(flags)}")
    print(f"load average at the start: {load()}")
    cases = a.cases.split(",")
    extra = [s for s in a.sets.split(",") if s]
    cluster = pathlib.Path(a.cluster) if a.cluster else work / "hosts.toml"
    measured = {c: [] for c in cases}
    with netns_hosts.hosts(2, inter=a.inter, slots=2, tag="pb") as (env, names):
        print(f"hosts {', '.join(names)}, each link shaped to {a.inter} per direction (tbf)")
        if not a.cluster:
            subprocess.run([a.bin, "plan", "calibrate", "--np", "4", "--out", str(cluster)], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            print(f"calibrated: {cluster} (load average now {load()})")
        for r in range(a.rounds):
            for c in cases:
                sets, mapping = CASES[c]
                run = work / f"{c}-r{r}"
                cmd = [a.bin, "train", "--preset", a.preset, "--np", "2", "--out", str(run), "--overwrite", "--quiet"]
                for s in sets + extra + [f"train.steps={a.steps}", "train.eval_every=0", "evidence.checksum_every=0",
                                         f"train.precision={a.precision}"]:
                    cmd += ["--set", s]
                subprocess.run(cmd, env=dict(env, OMPI_MCA_rmaps_base_mapping_policy=mapping), check=True,
                               stdout=subprocess.DEVNULL)
                measured[c].append(median_step(run))
    text = cluster.read_text()
    for line in text.splitlines():
        if line.startswith("# fit:") or "nic_gbits_per_s" in line or "bandwidth_gbytes_per_s" in line:
            print(line)
    print()
    print(f"| strategy | ranks on | measured s (median of {a.rounds} rounds) | predicted s | error | "
          "compute s | tp comm s | pipeline idle s | dp sync s | tp / dp / pp link |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for c in cases:
        run = work / f"{c}-r{a.rounds - 1}"
        p = subprocess.run([a.bin, "plan", "--cluster", str(cluster), "--run", str(run), "--json"], capture_output=True,
                           text=True)
        hosts = sorted({r["host"] for r in json.loads((run / "topology.json").read_text())["ranks"]})
        m = statistics.median(measured[c])
        if p.returncode != 0:
            print(f"| {c} | {', '.join(hosts)} | {m:.4g} | (not planned: {p.stderr.strip()}) | | | | | | |")
            continue
        j = json.loads(p.stdout)
        st = j["step"]
        links = j["placement"]["links"]
        err = (st["seconds"] - m) / m
        link = " / ".join(links[x]["link"].replace("intra-node ", "").replace("inter-node ", "net ")
                          if links[x]["group_size"] > 1 else "-" for x in ("tp", "dp", "pp"))
        print(f"| {c} | {', '.join(hosts)} | {m:.4g} | {st['seconds']:.4g} | {100 * err:+.1f} % | "
              f"{st['compute_seconds']:.4g} | {st['pass_comm_seconds']:.4g} | "
              f"{j['pipeline']['simulated_seconds'] - st['compute_seconds'] - st['pass_comm_seconds']:.4g} | "
              f"{st['after_pipeline_seconds']:.4g} | {link} |")
    print()
    for c in cases:
        print(f"{c}: rounds " + ", ".join(f"{x:.4g}" for x in measured[c]) + " s")
    print(f"load average at the end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
