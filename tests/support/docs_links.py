"""Dangling references in the documentation: every relative link and every file path written in README.md
and docs/**/*.md must name a file, folder or heading that exists, and so must every docs/ path named in a
source comment (src/, tests/, bench/, scripts/, configs/, fuzz/, cmake/, data/tools/).

What counts as a reference:
  * a Markdown link or image `[text](target)` whose target has no scheme: resolved against the page's
    folder; `#anchor` (alone or after a .md target) must be a heading of that page (GitHub's slugs);
  * a path in the text that starts with a top-level folder of the repository (docs/, src/, tests/,
    configs/, scripts/, bench/, data/, cmake/, fuzz/): resolved against the root; `{a,b}` alternatives
    and `*` globs are expanded (a glob must match something);
  * in README.md and docs/ a source file named from its layer, `parallel/engine.h`, `evidence/faults.cc`:
    resolved against src/ (the layers are src/'s folders);
  * a section named after a page, `docs/comm.md §3`, `docs/compare.md §"Bubble"`, `docs/prove.md §gate`:
    a number must begin a heading of that page (`## 3. The communicator API`), words must begin a word
    of one (case-insensitive).
Not checked: URLs (nothing is fetched), paths outside the repository (`shared/design/...`), bundle paths
(`parallel/checksums.jsonl`, `runs/...`), placeholders in capitals (`rank-NNNNN`, `DIR/summary.md`).
Usage: docs_links.py [ROOT]   (default: the source dir, sp_test.SOURCE_DIR). Exit 0 when every reference
resolves, 1 listing each dangling one as `file:line: reference (why)`.
"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sp_test as T  # noqa: E402

TOP = ("docs", "src", "tests", "configs", "scripts", "bench", "data", "cmake", "fuzz")
CODE_DIRS = ("src", "tests", "bench", "scripts", "configs", "fuzz", "cmake", os.path.join("data", "tools"))
CODE_EXT = (".h", ".cc", ".py", ".sh", ".txt", ".cmake", ".toml")

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# A path: a top-level folder, then path characters; {a,b} alternatives allowed.
PATH = re.compile(r"(?<![\w./\-~$])((?:%s)/(?:[\w.*\-]|\{[\w.,\-]+\}|/)*)" % "|".join(TOP))
# A source file named from its layer (README.md and docs/ only).
LAYER_FILE = re.compile(r"(?<![\w./\-])((?:%s)/[\w/]*\w\.(?:h|cc))\b")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
SECTION = re.compile(r"\s*§\s*(?:\"([^\"]+)\"|([\w.\-]*\w))")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(title):
    """GitHub's heading anchor: inline markup dropped, lower case, punctuation removed, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link's text only
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def headings(path, cache={}):
    """The page's headings outside code blocks: (titles, GitHub anchors)."""
    if path not in cache:
        seen, titles, slugs = {}, [], set()
        fenced = False
        for line in open(path, encoding="utf-8"):
            if FENCE.match(line):
                fenced = not fenced
            m = None if fenced else HEADING.match(line)
            if m:
                titles.append(m.group(2))
                s = slug(m.group(2))
                n = seen.get(s, 0)
                seen[s] = n + 1
                slugs.add(s if n == 0 else f"{s}-{n}")
        cache[path] = (titles, slugs)
    return cache[path]


def anchors(path):
    return headings(path)[1]


def has_section(path, name):
    """§3 / §3.1: a heading that begins with the number; §word(s): a heading with a word that they begin."""
    titles = [t.replace("`", "").lower() for t in headings(path)[0]]
    if re.fullmatch(r"\d+(\.\d+)*", name):
        return any(re.match(re.escape(name) + r"[.\s]", t) for t in titles)
    return any(re.search(r"(^|\W)" + re.escape(name.lower()), t) for t in titles)


def check_section(root, ref, after, where, problems):
    """`after` is the text that follows the reference `ref` (a .md path that exists)."""
    m = SECTION.match(after)
    if not m or not ref.endswith(".md"):
        return
    name = m.group(1) or m.group(2)
    if not has_section(os.path.join(root, ref), name):
        problems.append(f"{where}: {ref} §{name} (no such section in {ref})")


def expand(ref):
    """`a/{b,c}.h` -> [`a/b.h`, `a/c.h`]."""
    m = re.search(r"\{([^}]*)\}", ref)
    if not m:
        return [ref]
    return [x for alt in m.group(1).split(",") for x in expand(ref[:m.start()] + alt + ref[m.end():])]


def is_placeholder(ref):
    """`rank-NNNNN.jsonl`, `DIR/...`, `step-N.partial`: names a reader fills in, not files of the tree."""
    return any(re.fullmatch(r"[A-Z]{2,}(\.[a-z]+)?", part) or re.search(r"(^|[\-_.])N+([\-_.]|$)", part)
               for part in ref.split("/"))


# Files a command writes into the tree (and .gitignore lists): named by the docs, absent from a fresh clone.
GENERATED = {"configs/clusters/this-host.toml"}


def missing(root, ref):
    """Why `ref` (relative to root) does not resolve, or None."""
    for one in expand(ref):
        if one in GENERATED:
            continue
        full = os.path.join(root, one)
        if any(c in one for c in "*?["):
            if not glob.glob(full, recursive=True):
                return f"no file matches {one}"
        elif not os.path.exists(full):
            return f"{one} does not exist"
    return None


def clean(ref):
    """Trailing sentence punctuation is not part of a path."""
    return ref.rstrip(".,:;")


def check_page(root, page, problems):
    rel = os.path.relpath(page, root)
    here = os.path.dirname(page)
    fenced = False
    for no, line in enumerate(open(page, encoding="utf-8"), 1):
        if FENCE.match(line):
            fenced = not fenced
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.\-]*:", target) or target.startswith("//"):
                continue  # a URL or mailto:
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(here, path)) if path else page
            if not os.path.exists(dest):
                problems.append(f"{rel}:{no}: {target} ({os.path.relpath(dest, root)} does not exist)")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                problems.append(f"{rel}:{no}: {target} (no heading #{anchor} in {os.path.relpath(dest, root)})")
        text = LINK.sub(" ", line)  # link targets are checked above, relative to the page
        for m in PATH.finditer(text):
            ref = clean(m.group(1))
            if is_placeholder(ref) or ref.rstrip("/") in TOP:
                continue
            why = missing(root, ref)
            if why and ref.endswith((".h", ".cc")) and not missing(root, os.path.join("src", ref)):
                why = None  # data/loader.h: the data layer's file, named from its layer
            if why:
                problems.append(f"{rel}:{no}: {ref} ({why})")
            else:
                check_section(root, ref, text[m.start() + len(ref):], f"{rel}:{no}", problems)
        for m in LAYER_FILE.finditer(text):
            ref = m.group(1)
            if m.start() > 0 and text[m.start() - 1] == "/":
                continue
            if ref.split("/")[0] in TOP and not missing(root, ref):
                continue  # data/... may be a top-level path as well as a layer
            if not is_placeholder(ref) and missing(root, os.path.join("src", ref)):
                problems.append(f"{rel}:{no}: {ref} (src/{ref} does not exist)")


def check_code(root, path, problems):
    rel = os.path.relpath(path, root)
    try:
        lines = open(path, encoding="utf-8").readlines()
    except UnicodeDecodeError:
        return
    for no, line in enumerate(lines, 1):
        for m in PATH.finditer(line):
            ref = clean(m.group(1))
            if not ref.startswith("docs/") or is_placeholder(ref) or ref == "docs/":
                continue
            why = missing(root, ref)
            if why:
                problems.append(f"{rel}:{no}: {ref} ({why})")
            else:
                check_section(root, ref, line[m.start() + len(ref):], f"{rel}:{no}", problems)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else T.SOURCE_DIR)
    layers = sorted(d for d in os.listdir(os.path.join(root, "src")) if os.path.isdir(os.path.join(root, "src", d)))
    global LAYER_FILE
    LAYER_FILE = re.compile(r"(?<![\w./\-])((?:%s)/[\w/]*\w\.(?:h|cc))\b" % "|".join(layers))
    problems = []
    pages = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"),
                                                                 recursive=True))
    for page in pages:
        check_page(root, page, problems)
    for d in CODE_DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith(CODE_EXT) or f == "CMakeLists.txt":
                    check_code(root, os.path.join(dirpath, f), problems)
    for p in problems:
        print(p)
    print(f"{len(problems)} dangling reference(s) in {len(pages)} pages and the source comments under "
          f"{', '.join(CODE_DIRS)}" if problems else f"PASS: every reference in {len(pages)} pages resolves")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
