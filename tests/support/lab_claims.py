"""A lab's "what to observe" claims against the bundle the lab wrote (docs/formats/labs.md §Claims).

    lab_claims.py --bin shardproof --work DIR KEY BUNDLE [--plant 'CLAIM=>WRONG' ...]

1. `shardproof lab check KEY BUNDLE` must exit 0: every claim of every observation holds.
2. For every claim, a copy of the catalogue with that one claim negated (== ↔ !=, < ↔ >=, > ↔ <=,
   has ↔ lacks) must make `lab check --catalogue COPY` exit 1 and mark that claim FAIL: each claim is
   evaluated and can fail, none is a constant.
3. Each --plant 'CLAIM=>WRONG' replaces one claim by a realistic wrong one (a note as it was once written,
   e.g. the end-of-step idle on stage 0) in a copy; it must fail the same way.
Prints how many claims were checked and planted. Standard library only (Debian's /usr/bin/python3).
"""
import argparse
import os
import subprocess
import sys
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sp_test as T  # noqa: E402

NOT = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">", "has": "lacks", "lacks": "has"}


def negated(claim):
    words = claim.split()
    for i, w in enumerate(words[1:], 1):
        if w in NOT:
            words[i] = NOT[w]
            return " ".join(words)
    raise SystemExit(f"FAIL: claim without an operator: {claim}")


def toml_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def check(binary, key, bundle, catalogue=None):
    cmd = [binary, "lab", "check", key, bundle]
    if catalogue:
        cmd += ["--catalogue", catalogue]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def lab_span(text, key):
    """Where the [[lab]] table of `key` is in the catalogue's text: (start, end)."""
    start = text.index(f'key = "{key}"')
    end = text.find("[[lab]]", start)
    return start, len(text) if end < 0 else end


def planted_fails(binary, key, bundle, text, old, new, work, n):
    """A copy of the catalogue with `old` replaced by `new` in lab `key` must fail `lab check` on `new`."""
    start, end = lab_span(text, key)
    table = text[start:end]
    if table.count(toml_string(old)) != 1:
        T.fail(f"{key}: the claim is not written exactly once in the lab: {old}")
    path = os.path.join(work, f"planted-{key}-{n}.toml")
    with open(path, "w") as f:
        f.write(text[:start] + table.replace(toml_string(old), toml_string(new)) + text[end:])
    rc, out = check(binary, key, bundle, path)
    if rc != 1 or f"FAIL {new}" not in out:
        T.fail(f"{key}: the planted wrong claim '{new}' did not fail lab check (exit {rc}):\n{out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--plant", action="append", default=[], help="CLAIM=>WRONG")
    ap.add_argument("key")
    ap.add_argument("bundle")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    catalogue = T.source_dir("configs", "labs", "catalogue.toml")
    with open(catalogue) as f:
        text = f.read()
    lab = next(lab for lab in tomllib.loads(text)["lab"] if lab["key"] == a.key)
    claims = [c for o in lab["observe"] for c in o["check"]]

    rc, out = check(a.bin, a.key, a.bundle)
    print(out)
    if rc != 0:
        T.fail(f"{a.key}: lab check exited {rc}: a claim of the notes does not hold on {a.bundle}")
    for n, c in enumerate(claims):
        planted_fails(a.bin, a.key, a.bundle, text, c, negated(c), a.work, n)
    for n, p in enumerate(a.plant):
        old, new = p.split("=>")
        planted_fails(a.bin, a.key, a.bundle, text, old.strip(), new.strip(), a.work, f"r{n}")
    print(f"{a.key}: {len(claims)} claims of {len(lab['observe'])} observations hold; each one negated and "
          f"{len(a.plant)} realistic wrong claim(s) planted in a copy of the catalogue fail")


if __name__ == "__main__":
    main()
