#!/usr/bin/env python3
"""Runs across hosts: network namespaces of this machine as hosts, joined through a bridge by links shaped with tbf
(scripts/netns_hosts.sh), mpirun launching into them through scripts/netns_agent.sh, TCP between hosts and shared
memory within one (docs/cluster.md §"Rehearsing on one machine", issue 47).

Cases:
  hosts_cleanup    the script's contract: `up` makes the hosts, a body that fails still leaves nothing behind,
                   `down` is idempotent, a refused `up` leaves nothing, the agent refuses a host that is not one;
  prove_dp2_tp2    (long) `prove` unchanged on dp 2 × tp 2 across two hosts, tp inside each host and dp across: PASS,
                   topology.json names two hosts with every tp group on one and every dp group across both, and
                   every checksum, loss and checkpoint shard bit for bit equal to the same prove on one host;
  planner_orders   (long) `plan calibrate` across the hosts measures the shaped link (within a factor of the tbf
                   rate), and the planner, pricing tp 2 within a host and tp 2 across hosts where each run ran
                   (`plan --run`), orders within above across; the runs' measured step times agree.
Every case skips (exit 77) with the reason when this machine cannot make namespaces (not root, no CAP_NET_ADMIN).
Usage: multihost_test.py CASE --bin shardproof --work DIR
"""
import glob
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import netns_hosts as H  # noqa: E402
import sp_test as T  # noqa: E402

# The tiny preset made smaller and shorter (tests/tp/anchored.py's SMALL, 10 steps): a prove of dp 2 × tp 2 in a
# few minutes on two shared cores.
SMALL = ["model.dim=128", "model.ffn_dim=344", "model.n_layers=4", "model.max_seq=64", "train.seq_len=64",
         "train.steps=10", "train.eval_every=5", "train.eval_batches=2", "train.warmup_steps=2", "train.lr=3e-3",
         "prove.eval_margin=0.25"]
STAGES = ["reference", "parallel", "fault", "recovery", "anchored", "fault-anchored"]
args = None


def ip_names(kind):
    p = T.run(["ip", "-o", "link", "show"] if kind == "link" else ["ip", "netns", "list"])
    return [line.split()[1 if kind == "link" else 0].rstrip(":").split("@")[0] for line in p.stdout.splitlines()]


def check_hosts_cleanup():
    prefix = H.prefix_for("hc")
    script = ["bash", H.SCRIPT]
    try:
        with H.hosts(2, inter="100mbit", slots=1, tag="hc") as (env, names):
            T.check(names == [f"{prefix}h0", f"{prefix}h1"], f"hosts {names}")
            T.check(set(names) <= set(ip_names("netns")), f"namespaces {ip_names('netns')} lack {names}")
            q = T.run(["ip", "netns", "exec", names[1], "tc", "qdisc", "show", "dev", "eth0"])
            T.check("tbf" in q.stdout and "100Mbit" in q.stdout, f"eth0 of {names[1]} is not shaped: {q.stdout}")
            # The agent runs a command in the named host, as ssh would, with the host's name.
            a = T.run([os.path.join(T.source_dir("scripts"), "netns_agent.sh"), names[1], "hostname;", "ip", "-4",
                       "-o", "addr", "show", "dev", "eth0"])
            T.check(a.returncode == 0 and a.stdout.startswith(names[1]), f"agent: {a.stdout} {a.stderr}")
            r = T.run([os.path.join(T.source_dir("scripts"), "netns_agent.sh"), "example.org", "true"])
            T.check(r.returncode == 255 and "not a namespace host" in r.stderr, f"agent took example.org: {r.stderr}")
            subnet = env["OMPI_MCA_btl_tcp_if_include"][:-len(".0/24")]
            taken = T.run(script + ["up", "2", "--prefix", prefix + "x", "--subnet", subnet])
            T.check(taken.returncode == 2 and "in use" in taken.stderr, f"a subnet in use was taken: {taken.stderr}")
            # Two `up`s at once (ctest -j 2) take two subnets.
            pair = [subprocess.Popen(script + ["up", "2", "--prefix", f"{prefix[:6]}p{i}"], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True) for i in (0, 1)]
            outs = [p.communicate()[0] for p in pair]
            for i in (0, 1):
                T.run(script + ["down", "--prefix", f"{prefix[:6]}p{i}"])
            nets = {o.split(" on ")[1].split()[0] for o in outs if " on " in o}
            T.check(len(nets) == 2 and subnet + ".0/24" not in nets, f"concurrent ups took {nets} (ours {subnet})")
            raise RuntimeError("a failing body")
    except RuntimeError as e:
        T.check(str(e) == "a failing body", f"unexpected error {e}")
    left = [n for n in ip_names("netns") + ip_names("link") if n.startswith(prefix)]
    T.check(not left, f"left behind after a failing body: {left}")
    for _ in range(2):
        d = T.run(script + ["down", "--prefix", prefix])
        T.check(d.returncode == 0, f"down on nothing exited {d.returncode}: {d.stderr}")
    bad = T.run(script + ["up", "2", "--inter", "fast", "--prefix", prefix])
    T.check(bad.returncode == 2 and "--inter 'fast'" in bad.stderr and "hint:" in bad.stderr, f"bad rate: {bad.stderr}")
    left = [n for n in ip_names("netns") + ip_names("link") if n.startswith(prefix)]
    T.check(not left, f"left behind after a refused up: {left}")


def prove(out, env):
    cmd = [args.bin, "prove", "--preset", "tiny", "--np", "4", "--out", out, "--quiet"] + T.sets(SMALL + [
        "parallel.tp=2"])
    p = T.run(cmd, timeout=2400, env=env, echo=True)
    gate = T.read_json(os.path.join(out, "gate.json")) if os.path.exists(os.path.join(out, "gate.json")) else {}
    if p.returncode != 0 or gate.get("verdict") != "PASS":
        T.show(p, tail=4000)
        for log in glob.glob(os.path.join(out, "logs", "*.log")):
            print(f"--- {log}\n{open(log).read()[-3000:]}")
        T.fail(f"prove in {out} exited {p.returncode}, verdict {gate.get('verdict')}")


def shard_digests(stage_dir):
    """{checkpoint step: {shard file: sha256}} from every manifest of a stage."""
    out = {}
    for m in sorted(glob.glob(os.path.join(stage_dir, "checkpoints", "step-*", "manifest.json"))):
        j = T.read_json(m)
        out[os.path.basename(os.path.dirname(m))] = {s["file"]: s["sha256"] for s in j["shards"]}
    return out


def check_prove_dp2_tp2():
    one, two = os.path.join(args.work, "one-host"), os.path.join(args.work, "two-hosts")
    T.fresh(one)
    T.fresh(two)
    prove(one, dict(os.environ))
    with H.hosts(2, inter="1gbit", slots=2, tag="pv") as (env, names):
        prove(two, env)
    topo = T.read_json(os.path.join(two, "parallel", "topology.json"))
    host = [r["host"] for r in topo["ranks"]]
    T.check(sorted(set(host)) == sorted(names), f"ranks ran on {host}, the hosts are {names}")
    for g in topo["groups"]["tp"]:
        T.check(len({host[r] for r in g}) == 1, f"tp group {g} spans hosts {[host[r] for r in g]}")
    for g in topo["groups"]["dp"]:
        T.check(len({host[r] for r in g}) == 2, f"dp group {g} stays on {[host[r] for r in g]}")
    local = {r["host"] for r in T.read_json(os.path.join(one, "parallel", "topology.json"))["ranks"]}
    T.check(len(local) == 1 and not local & set(names), f"the one-host run ran on {local}")
    compared = 0
    for stage in STAGES:
        a, b = os.path.join(one, stage, "checksums.jsonl"), os.path.join(two, stage, "checksums.jsonl")
        T.check(os.path.exists(a) == os.path.exists(b), f"{stage}: checksums.jsonl in one bundle only")
        if not os.path.exists(a):
            continue
        T.check(T.read_bytes(a) == T.read_bytes(b), f"{stage}/checksums.jsonl differs between one host and two")
        la = [m.get("loss") for m in T.read_jsonl(os.path.join(one, stage, "metrics.jsonl"))]
        lb = [m.get("loss") for m in T.read_jsonl(os.path.join(two, stage, "metrics.jsonl"))]
        T.check(la == lb, f"{stage}: losses differ: {la} vs {lb}")
        da, db = shard_digests(os.path.join(one, stage)), shard_digests(os.path.join(two, stage))
        T.check(da == db, f"{stage}: checkpoint shards differ: {da} vs {db}")
        compared += 1
    T.check(compared >= 4, f"only {compared} stages compared")
    print(f"{compared} stages bit for bit equal on one host and on {names} (tp within a host, dp across)")


def median_step(run):
    steps = [m["step_s"] for m in T.read_jsonl(os.path.join(run, "metrics.jsonl")) if m.get("step", -1) >= 1
             and "step_s" in m]
    T.check(len(steps) >= 3, f"{run}: {len(steps)} timed steps")
    return statistics.median(steps)


def check_planner_orders():
    rate_gbit = 0.1
    cluster = os.path.join(args.work, "hosts.toml")
    runs = {}
    with H.hosts(2, inter=f"{int(rate_gbit * 1000)}mbit", slots=2, tag="po") as (env, names):
        T.run_ok([args.bin, "plan", "calibrate", "--np", "4", "--quick", "--out", cluster], env=env, timeout=900)
        for name, mapping in (("within", "slot"), ("across", "node")):
            run = os.path.join(args.work, f"tp2-{name}")
            T.fresh(run)
            e = dict(env, OMPI_MCA_rmaps_base_mapping_policy=mapping)
            T.run_ok([args.bin, "train", "--preset", "tiny", "--np", "2", "--out", run, "--quiet"] + T.sets(
                ["parallel.tp=2", "train.steps=5", "train.eval_every=0", "evidence.checksum_every=0"]), env=e,
                timeout=900)
            runs[name] = run
    text = open(cluster).read()
    print(text[:3000])
    c = json.loads(T.run_ok([args.bin, "plan", "--cluster", cluster, "--model", "tiny", "--json"]).stdout)["cluster"]
    T.check(c["nodes"] == 2 and c["devices_per_node"] == 2, f"calibrated {c['nodes']} × {c['devices_per_node']}")
    measured_gbit = c["inter_node"]["nic_gbits_per_s"]
    T.check(0.5 * rate_gbit < measured_gbit < 1.5 * rate_gbit,
            f"the inter-host link measured {measured_gbit} Gbit/s; tbf shapes it to {rate_gbit}")
    T.check(c["intra_node"]["bandwidth_gbytes_per_s"] > 10 * rate_gbit / 8, f"intra {c['intra_node']}")
    plans, measured = {}, {}
    for name, run in runs.items():
        hosts = {r["host"] for r in T.read_json(os.path.join(run, "topology.json"))["ranks"]}
        T.check(len(hosts) == (1 if name == "within" else 2), f"tp2 {name} ran on {hosts}")
        plans[name] = json.loads(T.run_ok([args.bin, "plan", "--cluster", cluster, "--run", run, "--json"]).stdout)
        measured[name] = median_step(run)
        tp = plans[name]["placement"]["links"]["tp"]
        print(f"tp2 {name}: predicted {plans[name]['step']['seconds']:.4f} s, measured {measured[name]:.4f} s; "
              f"tp link {tp['link']} {tp['bandwidth_gbytes_per_s']:.4g} GB/s")
    T.check(plans["within"]["placement"]["links"]["tp"]["link"].startswith("intra-node"), "within: tp link")
    T.check(plans["across"]["placement"]["links"]["tp"]["link"].startswith("inter-node"), "across: tp link")
    T.check(any("cross nodes" in w for w in plans["across"]["placement"]["warnings"]), "no placement warning")
    T.check(plans["within"]["step"]["seconds"] < plans["across"]["step"]["seconds"],
            "the planner does not rank tp within a host above tp across hosts")
    T.check(measured["within"] < measured["across"], f"measured within {measured['within']:.4f} s is not faster "
            f"than across {measured['across']:.4f} s")


def main():
    global args
    cases = {"hosts_cleanup": check_hosts_cleanup, "prove_dp2_tp2": check_prove_dp2_tp2,
             "planner_orders": check_planner_orders}
    args = T.case_args(sorted(cases))
    why = H.unavailable()
    if why:
        print(f"SKIP {args.case}: {why}")
        sys.exit(H.SKIP)
    os.makedirs(args.work, exist_ok=True)
    os.environ.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    sys.exit(T.run_case(args.case, cases[args.case]))


if __name__ == "__main__":
    main()
