#!/usr/bin/env python3
"""Compare two evidence bundles (run or proof) byte for byte, apart from what records the build revision,
the process ids, the bundle's own path and the clock (docs/testing.md §Refactoring). Used to show that a
refactoring changed no evidence: `scripts/bundle_diff.py OLD NEW` prints every other difference and exits 1
if there is one.

Normalized: JSON/JSONL keys that hold times or ids (TIME_KEYS) and the contract's revision and the hashes that
depend on it (REVISION_KEYS); the payload digests of the setup gather that carries every rank's pid; text that
contains either bundle's path. Skipped: logs/ (free text with times),
the seal (a hash of everything) and LATEST (names a manifest digest, which covers the contract hash)."""
import json
import os
import sys

TIME_KEYS = {"t_start_us", "t_end_us", "t0_us", "t1_us", "step_s", "compute_s", "tokens_per_s", "seconds", "pid"}
REVISION_KEYS = {"revision", "hash", "contract_hash", "digest"}
SKIP = ("logs/", "bundle.sha256")
SKIP_SUFFIX = ("LATEST",)


def normalize(value, root):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in TIME_KEYS or k in REVISION_KEYS:
                out[k] = "<normalized>"
            elif k == "measured" and isinstance(v, str) and "tokens/s" in v:
                out[k] = "<throughput>"
            elif k == "measured" and isinstance(v, str) and v.startswith("hash "):
                out[k] = "<contract hash>"
            else:
                out[k] = normalize(v, root)
        # The setup gather of every rank's host and pid (comm/topology.cc): its payload digests follow the pids.
        if value.get("phase") == "setup" and value.get("op") == "gather" and value.get("dtype") == "U8":
            out["in_digest"] = out["out_digest"] = "<pids>"
        # A manifest's record of metrics.jsonl (whose times differ): size and hash follow the times.
        if "evidence" in out and isinstance(out["evidence"], dict) and "metrics.jsonl" in out["evidence"]:
            out["evidence"]["metrics.jsonl"] = "<normalized>"
        return out
    if isinstance(value, list):
        return [normalize(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(root, "<bundle>")
    return value


def load(path, root):
    with open(path, "rb") as f:
        data = f.read()
    text = data.decode("utf-8", errors="replace")
    try:
        if path.endswith(".jsonl"):
            return [normalize(json.loads(line), root) for line in text.splitlines() if line]
        if path.endswith(".json"):
            return normalize(json.loads(text), root)
    except json.JSONDecodeError:
        pass
    if path.endswith(".md"):
        return "\n".join("<throughput>" if "tokens/s" in line else
                         "<contract hash>" if "| hash " in line else line.replace(root, "<bundle>")
                         for line in text.splitlines())
    return data


def files(root):
    out = set()
    for d, _, names in os.walk(root):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), root)
            if rel.startswith(SKIP) or rel.endswith(SKIP_SUFFIX):
                continue
            out.add(rel)
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    a, b = (os.path.abspath(p) for p in sys.argv[1:])
    fa, fb = files(a), files(b)
    problems = [f"only in {a}: {f}" for f in sorted(fa - fb)] + [f"only in {b}: {f}" for f in sorted(fb - fa)]
    same = 0
    for f in sorted(fa & fb):
        if load(os.path.join(a, f), a) == load(os.path.join(b, f), b):
            same += 1
        else:
            problems.append(f"differs: {f}")
    for p in problems:
        print(p)
    print(f"{same} of {len(fa | fb)} files equal after normalization; {len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
