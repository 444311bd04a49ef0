"""The code the Python test drivers share (tests/*/*.py): the command line `CASE --bin shardproof --work DIR`,
the mpirun prefix with the project's flags, running a command (its output shown when it fails), hard and
soft checks, JSON/JSONL readers, fresh directories and the source dir.

Not a test framework: each driver keeps its cases, its expectations and its verdict; the exit status of
the driver is the verdict. Standard library only: the drivers run under Debian's /usr/bin/python3.
A driver imports it with
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
    import sp_test as T
"""
import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# The repository root: $SP_SOURCE_DIR when set, else the tree this file is in (tests/support/../..).
SOURCE_DIR = os.environ.get("SP_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def source_dir(*parts):
    """A path under the repository root."""
    return os.path.join(SOURCE_DIR, *parts)


# ------------------------------------------------------------------------------------ command line

def case_args(choices=None, description=None):
    """The drivers' command line: CASE --bin shardproof --work DIR."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("case", choices=choices)
    ap.add_argument("--bin", required=True, help="the shardproof binary")
    ap.add_argument("--work", required=True, help="scratch directory shared by the cases of one suite")
    return ap.parse_args()


# ------------------------------------------------------------------------------------ running

def mpirun(n):
    """`mpirun -np N` with the flags every multi-rank test uses (more ranks than cores, no binding, root),
    and a session directory of its own: OpenMPI 4's shared one races between jobs that start and end at
    once (cli/run_setup.cc SessionBase; removed when the driver exits)."""
    cmd = ["mpirun", "-np", str(n), "--oversubscribe", "--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if "OMPI_MCA_orte_tmpdir_base" not in os.environ:
        base = tempfile.mkdtemp(prefix="sp-mpi-")
        atexit.register(shutil.rmtree, base, True)
        cmd += ["--mca", "orte_tmpdir_base", base]
    return cmd


def launch(binary, ranks):
    """The prefix that starts `binary` on `ranks` ranks: the binary alone for 1, under mpirun otherwise."""
    return [binary] if ranks == 1 else mpirun(ranks) + [binary]


def sets(overrides):
    """["a=1", "b=2"] -> ["--set", "a=1", "--set", "b=2"]."""
    out = []
    for s in overrides:
        out += ["--set", s]
    return out


def run(cmd, timeout=900, echo=False, **kw):
    """Runs `cmd` with its output captured as text; never raises on a non-zero exit. `echo`: prints the command,
    its exit status and its time once it ends."""
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if echo:
        print(f"$ {' '.join(cmd)}  (exit {p.returncode}, {time.time() - t0:.1f} s)", flush=True)
    return p


def show(p, tail=None):
    """Prints a finished command's stdout and stderr (the last `tail` characters of each)."""
    out, err = (p.stdout or "", p.stderr or "") if tail is None else ((p.stdout or "")[-tail:], (p.stderr or "")[-tail:])
    print(out, err)


def run_ok(cmd, timeout=900, **kw):
    """Runs `cmd`; a non-zero exit prints its output and fails the driver naming the command."""
    p = run(cmd, timeout=timeout, **kw)
    if p.returncode != 0:
        show(p)
        fail(f"command exited {p.returncode}: {' '.join(cmd)}")
    return p


# ------------------------------------------------------------------------------------ verdicts

class Failure(Exception):
    """A failed expectation that ends the case (see check, and run_case which reports it)."""


def fail(msg):
    """Ends the driver now: prints FAIL with the reason and exits 1."""
    print(f"FAIL: {msg}", flush=True)
    sys.exit(1)


def check(cond, msg):
    """A hard check: raises Failure(msg) when `cond` is false."""
    if not cond:
        raise Failure(msg)


def run_case(name, body):
    """Runs body(); returns the exit status: 0 and `PASS name`, or 1 and `FAIL: name` with the Failure."""
    try:
        body()
    except Failure as e:
        print("FAIL:", name, "\n", e)
        return 1
    print("PASS", name)
    return 0


def drive(cases, keep_args):
    """The main of a driver whose cases are {name: body}: `CASE --bin --work` (case_args), --work created, mpirun
    allowed to oversubscribe; keep_args(args) hands the arguments to the driver before its case runs; prints the
    case's time and exits with its status."""
    args = case_args(sorted(cases))
    keep_args(args)
    os.makedirs(args.work, exist_ok=True)
    os.environ.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    t0 = time.time()
    rc = run_case(args.case, cases[args.case])
    print(f"{args.case}: {time.time() - t0:.1f} s")
    sys.exit(rc)


class Checks:
    """Soft checks: every failed expectation is printed and counted, the case goes on to report the rest."""

    def __init__(self):
        self.failures = []

    def __call__(self, cond, what):
        if not cond:
            self.failures.append(what)
            print("FAIL:", what, flush=True)
        return cond

    def verdict(self, name):
        """Prints `PASS name` or `FAIL name` and returns the exit status."""
        print("PASS" if not self.failures else "FAIL", name)
        return 1 if self.failures else 0


# ------------------------------------------------------------------------------------ files

def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_json(path):
    with open(path) as f:
        return json.load(f)


def read_jsonl(path):
    """One JSON value per non-empty line."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def fresh(path, create=False):
    """Removes `path` if it exists (and creates it empty when `create`); returns it."""
    shutil.rmtree(path, ignore_errors=True)
    if create:
        os.makedirs(path)
    return path
