#!/usr/bin/env python3
"""Every example command in README.md runs as written and ends as the README says (issue 21; `make test-long`).

The commands are read from README.md itself (every `$B ...`, `mpirun ... $B ...`, `/usr/bin/python3 examples/...`
and `.venv/bin/python examples/...` line of its ```sh blocks, in order, with `\\` continuations joined), so the README cannot drift from what is tested. They run in a scratch
directory that holds `build/bin/shardproof`, `data/`, `examples/` and `.venv/` as links to the real ones, so `runs/...` paths land there.
Expectations come from the README's own comments: the exit status is 0 unless the comment says `exit N` (then N:
`→ divergent-by-design, exit 1` is a documented outcome, not a failure), `→ WORD` must be printed when WORD is a
verdict (bitwise-equal, divergent-by-design, ...), and a `prove` must end with `verdict: PASS`. `openssl` lines run
too (the signing example makes its key), and so do `/usr/bin/python3 examples/...` lines. Not run: `make ...` (they are this suite's caller) and the `grads` line, whose
file names are placeholders (its behaviour is tested by tests/oracle).
Usage: readme_examples.py --bin shardproof --source SRC --work DIR
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

SKIP = ("make ", "$B grads ")
VERDICTS = ("bitwise-equal", "within-tolerance", "divergent-by-design", "divergent", "incomplete")


def commands(readme):
    text = open(readme).read()
    out = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            cmd = line.split("  #")[0].strip()
            comment = line.split("#", 1)[1].strip() if "  #" in line else ""
            if not cmd or cmd.startswith("B=") or cmd.startswith(SKIP):
                continue
            if "$B" in cmd or cmd.startswith(("openssl ", "/usr/bin/python3 examples/", ".venv/bin/python examples/")):
                out.append((re.sub(r"\s+", " ", cmd), comment))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(os.path.join(args.work, "build"))
    os.symlink(os.path.dirname(os.path.abspath(args.bin)), os.path.join(args.work, "build", "bin"))
    os.symlink(os.path.join(args.source, "data"), os.path.join(args.work, "data"))
    os.symlink(os.path.join(args.source, "examples"), os.path.join(args.work, "examples"))
    os.symlink(os.path.join(args.source, ".venv"), os.path.join(args.work, ".venv"))
    env = dict(os.environ, B="build/bin/shardproof", HF_HUB_OFFLINE="1", OMPI_MCA_rmaps_base_oversubscribe="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmds = commands(os.path.join(args.source, "README.md"))
    if len(cmds) < 10:
        print(f"FAIL: found only {len(cmds)} commands in README.md")
        return 1
    for cmd, comment in cmds:
        print("$", cmd, flush=True)
        p = subprocess.run(cmd, shell=True, cwd=args.work, env=env, capture_output=True, text=True, timeout=3000)
        out = p.stdout + p.stderr
        documented = re.search(r"\bexit (\d+)\b", comment)
        want = int(documented.group(1)) if documented else 0
        if p.returncode != want:
            print(out[-4000:])
            print(f"FAIL: exit {p.returncode}, the README says {want}: {cmd}")
            return 1
        promised = re.search(r"→ ([a-z-]+)", comment)
        if promised and promised.group(1) in VERDICTS and promised.group(1) not in out:
            print(out[-2000:])
            print(f"FAIL: the README promises {promised.group(1)}: {cmd}")
            return 1
        if " prove " in f" {cmd} " and "verdict: PASS" not in out:
            print(out[-4000:])
            print(f"FAIL: prove did not end with verdict: PASS: {cmd}")
            return 1
        print("   ok:", (out.strip().splitlines() or [""])[-1][:160], flush=True)
    print(f"PASS: {len(cmds)} README commands ran as written")
    shutil.rmtree(args.work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
