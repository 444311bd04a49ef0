"""A lab's "what to observe" claims against the bundle the lab wrote (docs/formats/labs.md §Claims).

    lab_claims.py --bin shardproof --work DIR [--variation NAME] KEY BUNDLE [--plant 'CLAIM=>WRONG' ...]

1. `shardproof lab check KEY BUNDLE` must exit 0: every claim of every observation holds.
2. For every claim, a copy of the catalogue with that one claim negated (== ↔ !=, < ↔ >=, > ↔ <=,
   has ↔ lacks) must make `lab check --catalogue COPY` exit 1 and mark that claim FAIL: each claim is
   evaluated and can fail, none is a constant.
3. Each --plant 'CLAIM=>WRONG' replaces one claim by a realistic wrong one (a note as it was once written,
   e.g. the end-of-step idle on stage 0) in a copy; it must fail the same way.
With --variation NAME the claims are the lab's variation NAME's (BUNDLE is what `lab run KEY --variation NAME`
wrote), checked and planted inside that variation's table. Prints how many claims were checked and planted. Standard library only (Debian's /usr/bin/python3).
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


def check(binary, key, bundle, variation, catalogue=None):
    cmd = [binary, "lab", "check", key, bundle]
    if variation:
        cmd += ["--variation", variation]
    if catalogue:
        cmd += ["--catalogue", catalogue]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def lab_span(text, key, variation):
    """Where the [[lab]] table of `key` is in the catalogue's text: (start, end); with a variation, where its
    inline table is (from its name to the next variation's name or the lab's end)."""
    start = text.index(f'key = "{key}"')
    end = text.find("[[lab]]", start)
    end = len(text) if end < 0 else end
    variations = text.find("\nvariations = [", start, end)
    if not variation and variations >= 0:
        end = variations
    if variation:
        start = text.index(f'name = "{variation}"', start, end)
        following = text.find('{ name = "', start + 1, end)
        end = end if following < 0 else following
    return start, end


def planted_fails(binary, key, variation, bundle, text, old, new, work, n):
    """A copy of the catalogue with `old` replaced by `new` in lab `key` (or its variation) must fail `lab check`
    on `new`."""
    start, end = lab_span(text, key, variation)
    table = text[start:end]
    if table.count(toml_string(old)) != 1:
        T.fail(f"{key}: the claim is not written exactly once in the lab: {old}")
    path = os.path.join(work, f"planted-{key}-{variation or 'lab'}-{n}.toml")
    with open(path, "w") as f:
        f.write(text[:start] + table.replace(toml_string(old), toml_string(new)) + text[end:])
    rc, out = check(binary, key, bundle, variation, path)
    if rc != 1 or f"FAIL {new}" not in out:
        T.fail(f"{key}: the planted wrong claim '{new}' did not fail lab check (exit {rc}):\n{out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--plant", action="append", default=[], help="CLAIM=>WRONG")
    ap.add_argument("--variation", default="", help="the lab's variation whose bundle BUNDLE is")
    ap.add_argument("key")
    ap.add_argument("bundle")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    catalogue = T.source_dir("configs", "labs", "catalogue.toml")
    with open(catalogue) as f:
        text = f.read()
    lab = next(lab for lab in tomllib.loads(text)["lab"] if lab["key"] == a.key)
    if a.variation:
        lab = next(v for v in lab.get("variations", []) if v["name"] == a.variation)
    claims = [c for o in lab["observe"] for c in o["check"]]
    what = a.key + (f" variation {a.variation}" if a.variation else "")

    rc, out = check(a.bin, a.key, a.bundle, a.variation)
    print(out)
    if rc != 0:
        T.fail(f"{what}: lab check exited {rc}: a claim of the notes does not hold on {a.bundle}")
    for n, c in enumerate(claims):
        planted_fails(a.bin, a.key, a.variation, a.bundle, text, c, negated(c), a.work, n)
    for n, p in enumerate(a.plant):
        old, new = p.split("=>")
        planted_fails(a.bin, a.key, a.variation, a.bundle, text, old.strip(), new.strip(), a.work, f"r{n}")
    print(f"{what}: {len(claims)} claims of {len(lab['observe'])} observations hold; each one negated and "
          f"{len(a.plant)} realistic wrong claim(s) planted in a copy of the catalogue fail")


if __name__ == "__main__":
    main()
