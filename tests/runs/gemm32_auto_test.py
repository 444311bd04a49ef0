"""train.gemm32 = "auto", the default: the faster fp32 GEMM backend of this host, measured once and cached per host
(issue 48; docs/kernels.md §"The fp32 GEMM"; kernels/gemm32_auto.h), end to end through the real binary and mpirun.
Every case runs with its own $XDG_CACHE_HOME, so the test decides the pick by writing the cache and never depends
on which backend this host would measure faster.

  pick    a first run measures and writes the cache (one entry for this host); its contract records the backend it
          resolved to (config.train.gemm32, never "auto") and the one that ran (engine.gemm32). The entry edited to
          the other backend makes the next run resolve to that one, with other bits (the checksums differ);
          `--version` names the cache file.
  ranks   a 2-rank run whose second rank sees a cache with the other pick runs rank 0's pick on both ranks: the
          run is bitwise equal to the one-rank run of that pick (a rank on the other backend would have other
          gradients).
  resume  a checkpoint saved on the pick "onednn" is refused under the pick "openblas", naming config.train.gemm32
          and engine.gemm32 with the --set that runs the recorded one as the hint; with that --set it resumes.
Usage: gemm32_auto_test.py CASE --bin shardproof --work DIR
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402

SMALL = ["--preset", "tiny", "--quiet"] + T.sets(
    ["model.dim=64", "model.n_heads=4", "model.n_kv_heads=2", "model.ffn_dim=128", "model.max_seq=32",
     "train.seq_len=32", "train.steps=3", "train.eval_every=0", "train.eval_batches=2"])
OTHER = {"openblas": "onednn", "onednn": "openblas"}
ARGS = None
check = T.check


def cache_dir(name):
    return os.path.join(ARGS.work, name + "-cache")


def env(cache):
    e = dict(os.environ)
    e["XDG_CACHE_HOME"] = cache
    return e


def cache_file(cache):
    return os.path.join(cache, "shardproof", "gemm32.json")


def set_pick(cache, pick):
    """Edits every host entry of the cache to `pick` (a first run wrote the one entry of this host)."""
    doc = T.read_json(cache_file(cache))
    for entry in doc["hosts"].values():
        entry["pick"] = pick
    with open(cache_file(cache), "w") as f:
        json.dump(doc, f)


def train(out, cache, ranks=1, *extra):
    return T.run(T.launch(ARGS.bin, ranks) + ["train", "--out", out, *SMALL, *extra], timeout=300, env=env(cache))


def backend(out):
    c = T.read_json(os.path.join(out, "contract.json"))
    return c["config"]["train"].get("gemm32"), c["engine"].get("gemm32", "")


def records(out):
    return [(r["step"], r["phase"], r["tensor"], r.get("digest", r.get("bits")))
            for r in T.read_jsonl(os.path.join(out, "checksums.jsonl"))]


def first_run(name):
    """A one-rank run on a fresh cache: (its directory, the cache, the pick it measured)."""
    cache = T.fresh(cache_dir(name))
    out = T.fresh(os.path.join(ARGS.work, name))
    p = train(out, cache)
    check(p.returncode == 0, f"first run failed:\n{p.stderr[-3000:]}")
    doc = T.read_json(cache_file(cache))
    check(len(doc["hosts"]) == 1, f"the first run wrote {len(doc['hosts'])} host entries: {doc}")
    (key, entry), = doc["hosts"].items()
    check(entry["pick"] in OTHER and entry["openblas_ms"] > 0 and entry["onednn_ms"] > 0, f"entry {entry}")
    print(f"this host ({key}): picked {entry['pick']} (OpenBLAS {entry['openblas_ms']:.1f} ms, oneDNN "
          f"{entry['onednn_ms']:.1f} ms per probe round)")
    return out, cache, entry["pick"]


def case_pick():
    out, cache, pick = first_run("pick")
    lib, ran = backend(out)
    check(lib == pick and ran.startswith(pick + "-"), f"contract train.gemm32 = {lib}, engine.gemm32 = {ran}")
    other = OTHER[pick]
    set_pick(cache, other)
    again = T.fresh(os.path.join(ARGS.work, "pick-other"))
    p = train(again, cache)
    check(p.returncode == 0, f"run on the edited pick failed:\n{p.stderr[-3000:]}")
    lib2, ran2 = backend(again)
    check(lib2 == other and ran2.startswith(other + "-"), f"edited pick {other}: contract {lib2}, {ran2}")
    differ = sum(a != b for a, b in zip(records(out), records(again)))
    check(differ > 0, "the runs on the two picks have the same checksums: the pick did not change the backend")
    print(f"{pick} → {other}: {differ} of {len(records(out))} checksum records differ")
    v = T.run([ARGS.bin, "--version"], env=env(cache))
    check(cache_file(cache) in v.stdout, f"--version does not name the cache file:\n{v.stdout}")


def case_ranks():
    one, cache, pick = first_run("ranks-one")
    lone = T.fresh(cache_dir("ranks-rank1"))
    os.makedirs(os.path.join(lone, "shardproof"))
    with open(cache_file(lone), "w") as f:  # rank 1's own cache says the other backend
        json.dump({**T.read_json(cache_file(cache))}, f)
    set_pick(lone, OTHER[pick])
    out = T.fresh(os.path.join(ARGS.work, "ranks-dp2"))
    cmd = T.mpirun(1) + [ARGS.bin, "train", "--out", out, *SMALL, "--set", "parallel.dp=2", ":", "-np", "1", "env",
                         f"XDG_CACHE_HOME={lone}", ARGS.bin, "train", "--out", out, *SMALL, "--set", "parallel.dp=2"]
    p = T.run(cmd, timeout=300, env=env(cache))
    check(p.returncode == 0, f"2-rank run failed:\n{p.stderr[-3000:]}")
    check(backend(out)[0] == pick, f"the 2-rank run's contract says {backend(out)}, rank 0's pick is {pick}")
    v = T.run([ARGS.bin, "verify", out, "--against", one])
    check(v.returncode == 0 and "bitwise-equal" in v.stdout, f"dp2 against dp1 of the same pick:\n{v.stdout}{v.stderr}")
    print(v.stdout.splitlines()[0] if v.stdout else "?")


def case_resume():
    _, cache, _ = first_run("resume-seed")  # writes this host's entry
    set_pick(cache, "onednn")
    out = T.fresh(os.path.join(ARGS.work, "resume"))
    p = train(out, cache, 1, "--stop-after", "2", "--set", "evidence.checkpoint_every=1")
    check(p.returncode == 0 and backend(out)[0] == "onednn", f"run on the pick onednn:\n{p.stderr[-3000:]}")
    set_pick(cache, "openblas")
    r = train(out, cache, 1, "--resume", "required")
    text = r.stdout + r.stderr
    for part in ("config.train.gemm32", "engine.gemm32", "--set train.gemm32=onednn"):
        check(r.returncode != 0 and part in text, f"resume on the other pick (exit {r.returncode}) names {part}:\n{text}")
    r = train(out, cache, 1, "--resume", "required", "--set", "train.gemm32=onednn")
    check(r.returncode == 0, f"resume with the recorded backend pinned failed:\n{(r.stdout + r.stderr)[-3000:]}")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    def keep(args):
        global ARGS
        ARGS = args
    T.drive(CASES, keep)


if __name__ == "__main__":
    main()
