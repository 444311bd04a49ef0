"""Where the time goes (issue 28; docs/formats/timeline.md, docs/performance.md §"Where the time goes"), end to end
through the real binary and real mpirun, read from the run's files independently of the code that wrote them:

  pp2   fp32, pp 2 (1F1B, 4 micro-batches): every rank's timeline holds one split line per step after the step's
        intervals; each split's kinds are non-negative and sum to step_us exactly; every rank spent time in
        GEMMs, attention, the other memory-bound kernels, the optimizer and evidence at every step, and the last
        stage waited for the first (blocking receives); metrics.jsonl's time_split_s holds the same kinds, adds
        up to step_s and is rank 0's split of the same step; a split edited so that it no longer adds up, or
        with a negative kind, is refused by `shardproof bubble` naming the file and line.
  dp2   bf16, dp 2: the same per rank, and both ranks spent time in communication (the gradient all-reduce).
Each case takes a few seconds on 2 cores. Usage: time_split_test.py CASE --bin shardproof --work DIR
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402

# core/time_split.h kTimeKindNames, then "other".
KINDS = ["gemm", "attention", "memory_bound", "comm", "wait", "optimizer", "evidence", "other"]
TINY = ["model.dim=64", "model.n_heads=4", "model.n_kv_heads=2", "model.ffn_dim=128", "model.n_layers=2",
        "model.max_seq=32", "train.seq_len=32", "train.steps=4", "train.eval_every=0", "train.eval_batches=2"]
ARGS = None
check = T.check


def train(out, extra):
    p = T.run(T.launch(ARGS.bin, 2) + ["train", "--out", out, "--preset", "tiny", "--quiet"] + T.sets(TINY + extra),
              timeout=300)
    check(p.returncode == 0, f"train failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    return out


def splits_of(out, rank):
    """(split lines by step, steps that have intervals) of one rank's timeline."""
    lines = T.read_jsonl(os.path.join(out, "timeline", f"rank-{rank:05d}.jsonl"))
    splits, steps = {}, set()
    for i, r in enumerate(lines):
        if "split_us" in r:
            check(r["step"] not in splits, f"rank {rank}: two split lines for step {r['step']}")
            check(all("split_us" not in x for x in lines[i + 1:] if x["step"] == r["step"]),
                  f"rank {rank}: step {r['step']} has intervals after its split line")
            splits[r["step"]] = r
        else:
            steps.add(r["step"])
    return splits, steps


def check_run(out, spent):
    """Every rank's split per step is whole and adds up; every kind in `spent` is > 0 on every rank and step."""
    metrics = [m for m in T.read_jsonl(os.path.join(out, "metrics.jsonl")) if m["step"] >= 0 and "loss" in m]
    check(metrics, "metrics.jsonl holds no step")
    all_splits = {}
    for rank in range(2):
        splits, steps = splits_of(out, rank)
        check(sorted(splits) == sorted(steps) == [m["step"] for m in metrics],
              f"rank {rank}: split steps {sorted(splits)}, interval steps {sorted(steps)}")
        for step, r in sorted(splits.items()):
            parts = r["split_us"]
            check(sorted(parts) == sorted(KINDS), f"rank {rank} step {step}: kinds {sorted(parts)}")
            check(all(isinstance(parts[k], int) and parts[k] >= 0 for k in KINDS), f"rank {rank} step {step}: {parts}")
            check(sum(parts.values()) == r["step_us"], f"rank {rank} step {step}: {parts} sum to "
                  f"{sum(parts.values())}, step_us {r['step_us']}")
            for k in spent:
                check(parts[k] > 0, f"rank {rank} step {step}: no {k} time: {parts}")
            print(f"rank {rank} step {step}: step {r['step_us']} µs, " +
                  ", ".join(f"{k} {100 * parts[k] / max(1, r['step_us']):.1f} %" for k in KINDS))
        all_splits[rank] = splits
    for m in metrics:
        t = m.get("time_split_s")
        check(isinstance(t, dict) and sorted(t) == sorted(KINDS), f"metrics step {m['step']}: time_split_s {t}")
        check(all(v >= 0 for v in t.values()), f"metrics step {m['step']}: a negative kind in {t}")
        check(abs(sum(t.values()) - m["step_s"]) <= 1e-6, f"metrics step {m['step']}: {t} sum to "
              f"{sum(t.values())}, step_s {m['step_s']}")
        r0 = all_splits[0][m["step"]]
        check(abs(r0["step_us"] - m["step_s"] * 1e6) <= 1, f"step {m['step']}: rank 0 step_us {r0['step_us']}, "
              f"step_s {m['step_s']}")
        for k in KINDS[:-1]:  # each kind rounded down to µs in the timeline
            check(abs(r0["split_us"][k] - t[k] * 1e6) <= 1,
                  f"step {m['step']} {k}: timeline {r0['split_us'][k]} µs, metrics {t[k]} s")
    return all_splits


def bubble_refuses(out, edit, needle):
    """`shardproof bubble` on a copy of `out` whose rank-1 timeline's first split line was edited."""
    path = os.path.join(out, "timeline", "rank-00001.jsonl")
    original = open(path).read()
    lines = original.splitlines()
    i = next(i for i, line in enumerate(lines) if "split_us" in line)
    r = json.loads(lines[i])
    edit(r)
    lines[i] = json.dumps(r)
    try:
        open(path, "w").write("\n".join(lines) + "\n")
        p = T.run([ARGS.bin, "bubble", out])
        text = p.stdout + p.stderr
        check(p.returncode != 0 and f"rank-00001.jsonl:{i + 1}" in text and needle in text,
              f"bubble on an edited split (exit {p.returncode}):\n{text[-2000:]}")
    finally:
        open(path, "w").write(original)


def case_pp2():
    out = train(T.fresh(os.path.join(ARGS.work, "pp2")), ["parallel.pp=2"])
    splits = check_run(out, ["gemm", "attention", "memory_bound", "optimizer", "evidence"])
    check(all(s["split_us"]["wait"] > 0 for s in splits[1].values()),
          f"the last stage never waited for the first: {[s['split_us'] for s in splits[1].values()]}")
    p = T.run([ARGS.bin, "bubble", out])
    check(p.returncode == 0, f"bubble of the untouched run (exit {p.returncode}):\n{(p.stdout + p.stderr)[-2000:]}")

    def more_gemm(r):
        r["split_us"]["gemm"] += 1
    bubble_refuses(out, more_gemm, "split_us sums to")

    def negative(r):
        r["split_us"]["other"] += r["split_us"]["wait"] + 5
        r["split_us"]["wait"] = -5
    bubble_refuses(out, negative, "split_us.wait is negative")


def case_dp2():
    out = train(T.fresh(os.path.join(ARGS.work, "dp2")), ["parallel.dp=2", "train.precision=bf16"])
    check_run(out, ["gemm", "attention", "memory_bound", "comm", "optimizer", "evidence"])


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    def keep(args):
        global ARGS
        ARGS = args
    T.drive(CASES, keep)


if __name__ == "__main__":
    main()
