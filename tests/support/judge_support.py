"""What the judge's test drivers share (tests/judge/*.py): recording a run of the worked example
(examples/torch/train_llama.py), judging it, reading what the judge wrote under DIR/judge/, editing a recording
as a forger would (edit, re-hash the contract, reseal), and the report's embedded data.

Standard library only besides the recorder under test (python/ on sys.path).
"""
import hashlib
import json
import os
import shutil
import sys

import sp_test as T

sys.path.insert(0, T.source_dir("python"))
EXAMPLE = T.source_dir("examples", "torch", "train_llama.py")
PY = "/usr/bin/python3"


def record(out, strategy, steps, *extra, world=None, ok=True, fresh=True):
    """Records the example into a fresh `out` (fresh=False: as it is, e.g. followed by a judge already); returns
    out (or the process when ok=False: it may be refused)."""
    if fresh:
        T.fresh(out)
    shutil.rmtree(out + ".ckpt", ignore_errors=True)
    cmd = [PY, EXAMPLE, "--strategy", strategy, "--steps", str(steps), "--out", out, "--quiet"] + list(extra)
    if world:
        cmd += ["--world", str(world)]
    if not ok:
        return T.run(cmd, timeout=600)
    T.run_ok(cmd, timeout=600)
    return out


def judge(args, d, *extra):
    return T.run([args.bin, "judge", d] + list(extra), timeout=900)


def judged(d, name):
    """A file the judge wrote: DIR/judge/NAME."""
    return os.path.join(d, "judge", name)


def gate(d):
    return T.read_json(judged(d, "gate.json"))


def rows(d):
    """The gate's rows by their first word ("gradients", "update", "lr", "data", "traffic", ...)."""
    return {c["name"].split()[0].rstrip(":"): c for c in gate(d)["criteria"]}


def first(d):
    return T.read_json(judged(d, "first_divergence.json"))["first"]


def divergence(d):
    return T.read_json(judged(d, "first_divergence.json"))


def report_data(d):
    """The data report.html embeds (docs/formats/report_data.md): the JSON of its sp-data element."""
    html = open(judged(d, "report.html")).read()
    tag = '<script type="application/json" id="sp-data">'
    start = html.index(tag) + len(tag)
    return json.loads(html[start:html.index("</script>", start)])


def reseal(d, rank, rel):
    """Puts the edited (or removed) file `rel` back into rank's seal, as someone who edits a recording would."""
    p = os.path.join(d, "seal", f"rank-{rank:05d}.json")
    seal = T.read_json(p)
    path = os.path.join(d, rel)
    if os.path.exists(path):
        seal["files"][rel] = {"bytes": os.path.getsize(path),
                              "sha256": hashlib.sha256(T.read_bytes(path)).hexdigest()}
    else:
        seal["files"].pop(rel, None)
    with open(p, "w") as f:
        json.dump(seal, f, indent=2, sort_keys=True)


def edit_contract(d, change, rehash=True):
    """Applies change(contract) to contract.json, re-hashes it as the recorder does (or not), and reseals."""
    p = os.path.join(d, "contract.json")
    c = T.read_json(p)
    change(c)
    if rehash:
        body = dict(c)
        body.pop("hash")
        c["hash"] = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"),
                                              ensure_ascii=False).encode()).hexdigest()
    with open(p, "w") as f:
        f.write(json.dumps(c, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    reseal(d, 0, "contract.json")


def copy_recording(base, d):
    """A copy of a recording without what a judge wrote."""
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(base, d, ignore=shutil.ignore_patterns("judge"), symlinks=True)
    return d


def main(scope, doc):
    """Runs the case the command line names among scope's case_* functions; returns its verdict."""
    cases = {n[5:]: f for n, f in scope.items() if n.startswith("case_")}
    a = T.case_args(sorted(cases), doc)
    os.makedirs(a.work, exist_ok=True)
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return cases[a.case](a)
