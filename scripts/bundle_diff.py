#!/usr/bin/env python3
"""Compare two evidence bundles (run or proof) byte for byte, apart from what records the build revision,
the process ids, the bundle's own path and the clock (docs/testing.md §Refactoring). Used to show that a
refactoring changed no evidence: `scripts/bundle_diff.py OLD NEW` prints every other difference and exits 1
if there is one.

Normalized: JSON/JSONL keys that hold times or ids (TIME_KEYS) and the contract's revision and the hashes that
depend on it (REVISION_KEYS, and a checkpoint manifest's digest, also where anchors.json names it; a tensor's digest is compared); the setup exchange of every rank's host and pid (its lengths' digests, the texts'
sizes and digests); text that contains either bundle's path; the pid in a directory lock (.shardproof.lock:
"pid N on host H"); report.html: the page around its data is compared byte for byte and its data document (the
sp-data element, a pure function of the bundle's files) with the same rules, its pipeline and time views' clock
readings (CLOCK_VIEW_KEYS: the Gantt intervals, the bubble and the step splits measured from timeline/) as times. Skipped: logs/ (free text with
times), the seal (a hash of everything) and LATEST (names a manifest digest, which covers the contract hash)."""
import json
import os
import re
import sys

TIME_KEYS = {"t_start_us", "t_end_us", "t0_us", "t1_us", "step_s", "compute_s", "tokens_per_s", "seconds", "pid",
             "step_us", "split_us", "time_split_s"}
# manifest_digest: a checkpoint manifest's digest where another file names it (anchors.json of an anchored replay),
# which covers the contract hash like the manifest's own "digest" below.
REVISION_KEYS = {"revision", "hash", "contract_hash", "manifest_digest"}
# A checkpoint manifest's own digest covers the contract hash; every other "digest" (a tensor's, a payload's) is
# evidence and compared.
MANIFEST_FILE = "manifest.json"  # ckpt/format.h: RUN/checkpoints/step-NNNNNN/manifest.json
SKIP = ("logs/", "bundle.sha256")
SKIP_SUFFIX = ("LATEST",)
LOCK_FILE = ".shardproof.lock"  # evidence/bundle_paths.h kLockFile
REPORT_FILE = "report.html"  # evidence/bundle_paths.h kReportFile
REPORT_DATA = '<script type="application/json" id="sp-data">'  # report/render.cc kDataOpen
# The report's pipeline view (report/run_views.cc) is measured from timeline/*.jsonl, whose t0_us/t1_us are times:
# every interval and every bubble, span and compute/comm split in it is a clock reading.
# The time view (report/time_view.cc) is the timeline's split lines: its per-step parts and means are clock readings.
CLOCK_VIEW_KEYS = {
    "pipeline": {"intervals", "bubble", "bubble_max", "bubble_min", "model_bubble", "measured", "measured_max",
                 "measured_min", "comm_us", "compute_us", "idle_us", "span_us", "span_ms", "comm_ms", "compute_ms",
                 "comm_fraction", "compute_fraction"},
    "time": {"us", "step_us", "mean_us", "mean_step_us"},
}


def normalize(value, root, manifest=False):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in TIME_KEYS or k in REVISION_KEYS or (manifest and k == "digest"):
                out[k] = "<normalized>"
            elif k == "measured" and isinstance(v, str) and "tokens/s" in v:
                out[k] = "<throughput>"
            elif k == "measured" and isinstance(v, str) and v.startswith("hash "):
                out[k] = "<contract hash>"
            else:
                out[k] = normalize(v, root, manifest)
        # The setup exchange of every rank's host and pid as JSON text (comm/topology.cc): first the texts' lengths
        # (an all_gather of I64), then the texts (a gather of U8). A pid with another number of digits changes the
        # lengths, so the first one's digests and the second one's sizes and digests follow the pids.
        if value.get("phase") == "setup" and value.get("group") == "world":
            if value.get("op") == "all_gather" and value.get("dtype") == "I64" and value.get("seq") == 0:
                out["in_digest"] = out["out_digest"] = "<pids>"
            if value.get("op") == "gather" and value.get("dtype") == "U8":
                out["in_digest"] = out["out_digest"] = "<pids>"
                for k in ("count", "counts", "bytes", "wire_bytes"):
                    if k in out:
                        out[k] = "<pid lengths>"
        # A manifest's record of metrics.jsonl (whose times differ): size and hash follow the times.
        if "evidence" in out and isinstance(out["evidence"], dict) and "metrics.jsonl" in out["evidence"]:
            out["evidence"]["metrics.jsonl"] = "<normalized>"
        return out
    if isinstance(value, list):
        return [normalize(v, root, manifest) for v in value]
    if isinstance(value, str):
        return value.replace(root, "<bundle>")
    return value


def clock_normalized(value, keys):
    if isinstance(value, dict):
        return {k: "<clock>" if k in keys else clock_normalized(v, keys) for k, v in value.items()}
    if isinstance(value, list):
        return [clock_normalized(v, keys) for v in value]
    return value


def load_report(text, root):
    """(page before the data, normalized data, page after it); the whole text when it holds no data element."""
    start = text.find(REPORT_DATA)
    end = text.find("</script>", start)
    if start < 0 or end < 0:
        return text
    start += len(REPORT_DATA)
    try:
        data = normalize(json.loads(text[start:end]), root)
    except json.JSONDecodeError:
        return text
    views = data.get("views") if isinstance(data, dict) else None
    for i, view in enumerate(views if isinstance(views, list) else []):
        if isinstance(view, dict) and view.get("id") in CLOCK_VIEW_KEYS:
            views[i] = clock_normalized(view, CLOCK_VIEW_KEYS[view["id"]])
    return text[:start], data, text[end:]


def load(path, root):
    with open(path, "rb") as f:
        data = f.read()
    text = data.decode("utf-8", errors="replace")
    if os.path.basename(path) == LOCK_FILE:
        return re.sub(r"^pid \d+", "pid <pid>", text)
    if os.path.basename(path) == REPORT_FILE:
        return load_report(text, root)
    try:
        if path.endswith(".jsonl"):
            return [normalize(json.loads(line), root) for line in text.splitlines() if line]
        if path.endswith(".json"):
            return normalize(json.loads(text), root, os.path.basename(path) == MANIFEST_FILE)
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
    for d in (a, b):
        if not os.path.isdir(d):
            print(f"bundle_diff: {d} is not a directory\nhint: give two bundle directories (a run's --out)")
            return 2
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
