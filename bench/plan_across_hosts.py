#!/usr/bin/env python3
"""Predicted against measured step time across hosts (issue 47; docs/cluster.md §4;
docs/plan.md §"Across hosts: predicted against measured").

Brings up two namespace hosts of this machine (scripts/netns_hosts.sh: each link shaped with tbf to --inter per
direction, 2 slots a host), calibrates them as a cluster (`plan calibrate --np 4` across the hosts: the kernels,
the shared-memory link inside a host and the shaped network between hosts), then runs each strategy of at most 2
ranks (one rank per core) placed within one host or across the two (`OMPI_MCA_rmaps_base_mapping_policy` slot or
node; each strategy within one host too, the control that separates what the network adds from what the
machine's load does to the compute), `--rounds` times, interleaved, and plans each run where its ranks ran
(`plan --cluster FILE --run DIR`, nothing fitted). Prints the measured median step time (the median over rounds
of each run's median of steps >= 1) next to the prediction, the error and the predicted parts, and the time the
ranks spent moving bytes per step as the plan prices it (every priced collective and pipeline send) and as both
ranks' traces show it with the wait for the other rank removed (network_seconds), then the spread of the rounds.
A figure, not a test: the times move with the machine's load, printed before and after; the hosts are always
taken down.

usage: plan_across_hosts.py --bin build/bin/shardproof [--preset tiny] [--inter 300mbit] [--rounds 3]
                            [--cases dp2-within,dp2-across,tp2-within,tp2-across,pp2-within,pp2-across]
                            [--steps 8] [--precision fp32] [--cluster FILE]
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


def network_seconds(run):
    """The median over steps >= 1 of the time the run's ranks spent moving bytes, from both ranks' traces with the
    wait for the other rank removed: per collective, the later start to the earlier end over its two members; per
    pipeline message, the receive's end less the later of the send's and the receive's start. Under load a rank
    that arrives late makes its peer wait inside the op; that wait is compute noise, not the network."""
    recs = []
    for f in sorted((run / "trace").glob("rank-*.jsonl")):
        recs += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    per_step, coll, sends = {}, {}, {}
    for x in recs:
        if x.get("step", -1) < 1:
            continue
        if x["op"] in ("send", "isend"):  # the pipeline's sends are non-blocking (isend)
            sends[(x["group"], x["step"], x["tag"], x["peer_world"])] = x["t_start_us"]
        elif x["op"] != "recv":
            coll.setdefault((x["group"], x["seq"]), []).append(x)
    for ops in coll.values():
        if len(ops) == 2:
            moved = min(o["t_end_us"] for o in ops) - max(o["t_start_us"] for o in ops)
            per_step[ops[0]["step"]] = per_step.get(ops[0]["step"], 0) + max(0, moved) / 1e6
    for x in recs:  # two ranks: the send a receive matches went to the rank that is not the receive's peer
        if x.get("step", -1) >= 1 and x["op"] == "recv":
            start = [t for (g, st, tag, to), t in sends.items() if (g, st, tag) == (x["group"], x["step"], x["tag"])
                     and to != x["peer_world"]]
            if start:
                moved = x["t_end_us"] - max(start[0], x["t_start_us"])
                per_step[x["step"]] = per_step.get(x["step"], 0) + max(0, moved) / 1e6
    return statistics.median(per_step.values()) if per_step else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--inter", default="300mbit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--cases", default="dp2-within,dp2-across,tp2-within,tp2-across,pp2-within,pp2-across")
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
    moved = {c: [] for c in cases}  # network_seconds per round
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
                moved[c].append(network_seconds(run))
    text = cluster.read_text()
    for line in text.splitlines():
        if line.startswith("# fit:") or "nic_gbits_per_s" in line or "bandwidth_gbytes_per_s" in line:
            print(line)
    print()
    print(f"| strategy | ranks on | measured s (median of {a.rounds} rounds) | predicted s | error | "
          "compute s | tp comm s | pipeline idle s | dp sync s | network: predicted / measured s | tp / dp / pp link |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in cases:
        run = work / f"{c}-r{a.rounds - 1}"
        p = subprocess.run([a.bin, "plan", "--cluster", str(cluster), "--run", str(run), "--json"], capture_output=True,
                           text=True)
        hosts = sorted({r["host"] for r in json.loads((run / "topology.json").read_text())["ranks"]})
        m = statistics.median(measured[c])
        if p.returncode != 0:
            print(f"| {c} | {', '.join(hosts)} | {m:.4g} | (not planned: {p.stderr.strip()}) | | | | | | | |")
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
              f"{st['after_pipeline_seconds']:.4g} | {sum(t['seconds'] for t in j['traffic']):.4g} / "
              f"{statistics.median(moved[c]):.4g} | {link} |")
    print()
    for c in cases:
        print(f"{c}: rounds " + ", ".join(f"{x:.4g}" for x in measured[c]) + " s; network " +
              ", ".join(f"{x:.4g}" for x in moved[c]) + " s")
    print(f"load average at the end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
