"""Reads a recording made by an example under examples/ (python/shardproof_torch's files) the way the judge's reader
will, for the package's pytest files (tests/python/): the one home of these helpers. record() runs an example;
check_recording() asserts the contract's grid and ZeRO stage, that every (step, phase, tensor)'s summaries tile the
logical tensor exactly once (boxes, even splits and flat fragments alike), that replicas of a piece agree (SHA-256),
and that every rank's clip norm is the single-device run's (SINGLE_NORMS); traced() tallies the trace. judge(),
judged_rows() and first_divergence() run the judge and read its files; edited_records() and refused() edit a
recording as a person would (a record changed, the seal recomputed) and require the judge to refuse it by name.
"""
import json
import os
import subprocess
import sys

ROOT = os.environ.get("SP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("SP_BIN") or os.path.join(ROOT, "build", "bin", "shardproof")
# `examples/hf_ddp/train.py --world 1 --steps 2 [--micro-batches M]`: the gradient norms of its two steps on one
# process, by micro-batches per step M (every example shares its model, seed and batches)
SINGLE_NORMS = {4: (1.5271, 1.9563), 3: (1.8194, 2.0453)}


def example(name):
    return os.path.join(ROOT, "examples", name, "train.py")


def record(tmp_path, name, *args, steps=2):
    """Runs examples/<name>/train.py for `steps` steps into a new directory; returns it."""
    out = str(tmp_path / "run")
    subprocess.run([sys.executable, example(name), "--steps", str(steps), "--out", out, "--quiet", *args],
                   check=True, env=dict(os.environ, HF_HUB_OFFLINE="1"), timeout=1500)
    return out


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def numel_of(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def piece_numel(rec, shape):
    """Elements of a tensor record's piece, whatever its shard form."""
    s = rec["shard"]
    if s is None:
        return numel_of(shape)
    if isinstance(s, dict):
        return s["numel"] if "numel" in s else numel_of(s["sizes"])
    return numel_of(shape) // s[2]


def check_recording(out, world, zero, dp, tp, pp=1, micro_batches=4):
    """The recording's contract, tiling, replicas and clip norms (module docstring); returns (contract, the set of
    (axis, op, phase) its trace holds)."""
    with open(os.path.join(out, "contract.json")) as f:
        contract = json.load(f)
    st = contract["strategy"]
    assert (st["zero"], st["dp"], st["tp"], st["pp"]) == (zero, dp, tp, pp), st
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from shardproof_torch import layout
    shapes = layout.logical_shapes(contract["model"])
    covered, holders, norms = {}, {}, {}
    for r in range(world):
        for rec in jsonl(os.path.join(out, "records", f"rank-{r:05d}.jsonl")):
            if rec["kind"] == "step":
                norms.setdefault(rec["step"], set()).add(round(rec["grad_norm"], 4))
                continue
            key = (rec["step"], rec["phase"], rec["tensor"])
            assert rec["local"] == piece_numel(rec, shapes[rec["tensor"]]), rec
            holders.setdefault(key + (json.dumps(rec["shard"]),), set()).add(rec.get("bits") or rec["sha256"])
            covered[key] = covered.get(key, 0) + rec["count"]
    for (step, phase, tensor), count in covered.items():
        assert count == numel_of(shapes[tensor]), f"{tensor} at step {step} ({phase}): {count} elements summarized"
    assert {t for _, _, t in covered} == set(shapes), "a tensor of the config is recorded by no rank"
    assert all(len(s) == 1 for s in holders.values()), "replicas of a piece differ"
    assert [sorted(norms[s]) for s in sorted(norms)] == [[x] for x in SINGLE_NORMS[micro_batches]], norms
    return contract, {(t["group"].split("[")[0], t["op"], t["phase"]) for r in range(world)
                      for t in jsonl(os.path.join(out, "trace", f"rank-{r:05d}.jsonl"))}


def judge(out):
    """`shardproof judge out`: (the completed process, judge/gate.json)."""
    judged = subprocess.run([BIN, "judge", out], capture_output=True, text=True, timeout=900)
    with open(os.path.join(out, "judge", "gate.json")) as f:
        return judged, json.load(f)


def judged_rows(judged, gate):
    """gate.json's criteria by name, after asserting the judge ran (exit 0 PASS, 1 FAIL, 3 UNVERIFIED)."""
    assert judged.returncode in (0, 1, 3), judged.stdout + judged.stderr
    return {c["name"]: c for c in gate["criteria"]}


def first_divergence(out):
    """judge/first_divergence.json's earliest finding and its pattern line: (first, pattern)."""
    with open(os.path.join(out, "judge", "first_divergence.json")) as f:
        doc = json.load(f)
    return doc["first"], doc["pattern"]


def edited_records(out, dest, rank, pick, change):
    """A copy of the recording `out` at `dest` whose records/rank-N.jsonl has change(record) applied to the first
    record pick(record) selects (written back compact and key-sorted, as the recorder writes), resealed as someone
    who edits a recording would (docs/judge.md §6: a seal is SHA-256s anyone can recompute). Returns dest."""
    import hashlib
    import shutil
    shutil.copytree(out, dest, ignore=shutil.ignore_patterns("judge"))
    rel = os.path.join("records", f"rank-{rank:05d}.jsonl")
    with open(os.path.join(dest, rel)) as f:
        lines = f.read().splitlines(keepends=True)
    for i, line in enumerate(lines):
        r = json.loads(line)
        if pick(r):
            change(r)
            lines[i] = json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n"
            break
    else:
        raise AssertionError(f"no record of {rel} to edit")
    data = "".join(lines).encode()
    with open(os.path.join(dest, rel), "wb") as f:
        f.write(data)
    seal_path = os.path.join(dest, "seal", f"rank-{rank:05d}.json")
    with open(seal_path) as f:
        seal = json.load(f)
    seal["files"][rel] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    with open(seal_path, "w") as f:
        json.dump(seal, f, indent=2, sort_keys=True)
    return dest


def refused(out, *expected):
    """`shardproof judge out` refuses the recording (exit 2) with a message holding every `expected` text."""
    p = subprocess.run([BIN, "judge", out], capture_output=True, text=True, timeout=900)
    text = p.stdout + p.stderr
    assert p.returncode == 2, f"exit {p.returncode}, expected 2 (refused):\n{text}"
    for e in expected:
        assert e in text, f"'{e}' not in:\n{text}"
    return text
