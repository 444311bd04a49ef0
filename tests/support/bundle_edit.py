"""Editing a copy of a proof bundle as a hostile user would (tests/proof/gate_tamper.py, gate_positions.py):
read and write JSONL records the way the engine writes them, reseal the bundle (bundle.sha256, as anyone can),
and copy a bundle cheaply. Every write replaces the file (a new inode), so a copy made with hard links
(copy_bundle) never changes the bundle it was copied from.
"""
import hashlib
import json
import os
import shutil
import struct

# What a verdict writes next to the sealed files (not in the seal).
DERIVED = {"gate.json", "summary.md", "first_divergence.json", "drift.json", "report.html"}


def lines(path):
    with open(path) as f:
        return f.read().splitlines()


def replace_file(path, text):
    """Writes `text` to a new file renamed over `path` (never into the old inode: it may be shared)."""
    tmp = path + ".edit-tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_lines(path, ls):
    replace_file(path, "\n".join(ls) + "\n")


def dump_like_engine(obj):
    """nlohmann::json::dump(): compact, keys sorted."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def read_json(path):
    with open(path) as f:
        return json.load(f)


def write_json(path, obj, indent=2):
    replace_file(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def edit_records(path, pick, change):
    """Applies `change` to the JSONL records for which pick(record, index) holds; returns how many changed."""
    out, n = [], 0
    for i, line in enumerate(lines(path)):
        r = json.loads(line)
        if pick(r, i):
            change(r)
            n += 1
        out.append(dump_like_engine(r))
    write_lines(path, out)
    return n


def drop_records(path, pick):
    """Removes the JSONL records for which pick(record, index) holds; returns how many were removed."""
    kept = [line for i, line in enumerate(lines(path)) if not pick(json.loads(line), i)]
    n = len(lines(path)) - len(kept)
    write_lines(path, kept)
    return n


def loss_bits(v):
    """The float64 bit pattern checksums.jsonl writes next to a loss."""
    return struct.pack(">d", v).hex()


def reseal(bundle):
    """bundle.sha256 recomputed over every file but the seal, the signature and the derived files."""
    entries = []
    for d, _, names in os.walk(bundle):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), bundle)
            if rel in ("bundle.sha256", "bundle.sig") or rel in DERIVED:
                continue
            with open(os.path.join(bundle, rel), "rb") as f:
                entries.append((rel, hashlib.sha256(f.read()).hexdigest()))
    entries.sort()
    replace_file(os.path.join(bundle, "bundle.sha256"), "".join(f"{h}  {rel}\n" for rel, h in entries))


def copy_bundle(src, dst, links=True):
    """A copy of `src` at `dst` (replaced); with `links`, files are hard links: edit them only through this
    module's writers (which replace files), never in place."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=os.link if links else shutil.copy2)
    return dst
