#!/usr/bin/env python3
# Rebuilds data/corpus/ from the upstream packages named in data/sources.json (see data/SOURCES.md).
# It is not part of the build: it documents, as code, every transformation between the upstream
# file and the bundled one, so anyone can re-derive the corpus and compare SHA-256s.
# Usage (Debian 12, npm on PATH):
#   mkdir /tmp/src && cd /tmp/src
#   apt-get download jargon-text=4.4.7-4.1 fortunes-zh=2.98 miscfiles=1.5+dfsg-4
#   for f in *.deb; do dpkg -x "$f" "x-${f%%_*}"; done
#   npm pack chinese-poetry@2.0.1 && mkdir cp && tar -xzf chinese-poetry-2.0.1.tgz -C cp
#   python3 /path/to/data/tools/build_corpus.py /tmp/src /path/to/data
# Every output is UTF-8 text, documents separated by a line holding only "%" (docs/data.md).
import gzip
import json
import os
import re
import sys

SEP = "\n%\n"


def write(out_dir, rel, docs):
    path = os.path.join(out_dir, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    docs = [d.strip("\n") for d in docs if d.strip()]
    for d in docs:
        assert "\n%\n" not in "\n" + d + "\n", rel
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(SEP.join(docs) + "\n")
    print(rel, len(docs), "documents", os.path.getsize(path), "bytes")


def jargon(src):
    # Jargon File 4.4.7: split before every chapter/appendix heading (a line starting at column 0),
    # every letter section of the lexicon (a line "  A", which starts that letter's list of entry
    # names), every "Table of Contents" line and every lexicon entry (a line "   :term: ...").
    # Text otherwise unchanged.
    with gzip.open(os.path.join(src, "x-jargon-text/usr/share/doc/jargon-text/jargon.txt.gz"), "rt",
                   encoding="utf-8") as f:
        lines = f.read().split("\n")
    docs, cur = [], []
    for line in lines:
        starts = (line and not line[0].isspace() and not line.startswith(("│", "├", "┌", "└"))) or \
            re.match(r"^   :[^:]+:", line) or re.match(r"^  [A-Z0-9]$", line) or \
            line == "   Table of Contents"
        if starts and cur:
            docs.append("\n".join(cur))
            cur = []
        cur.append(line)
    docs.append("\n".join(cur))
    return docs


def miscfile(src, name):
    # One document per file (the U.S. Constitution, the Declaration of Independence).
    with gzip.open(os.path.join(src, "x-miscfiles/usr/share/state", name), "rt", encoding="utf-8") as f:
        return [f.read()]


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def fortune(src, name):
    # fortunes-zh: already "%"-separated; only the ANSI SGR colour codes are removed.
    with open(os.path.join(src, "x-fortunes-zh/usr/share/games/fortunes", name), encoding="utf-8") as f:
        text = ANSI.sub("", f.read())
    return text.split("\n%\n")


def poetry(src, rel):
    # chinese-poetry: one document per JSON record: title (or chapter) line, then the lines of text.
    with open(os.path.join(src, "cp/package/dist", rel), encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = [data]
    docs = []
    for rec in data:
        head = [rec[k] for k in ("title", "chapter", "section", "author") if rec.get(k)]
        body = rec.get("content") or rec.get("paragraphs") or []
        docs.append("\n".join([" ".join(head)] + body))
    return docs


def main():
    src, out = sys.argv[1], sys.argv[2]
    write(out, "corpus/en/jargon-4.4.7.txt", jargon(src))
    write(out, "corpus/en/us-constitution.txt", miscfile(src, "us-constitution.gz"))
    write(out, "corpus/en/us-declaration.txt", miscfile(src, "us-declaration.gz"))
    write(out, "corpus/zh/tang300.txt", fortune(src, "tang300"))
    write(out, "corpus/zh/song100.txt", fortune(src, "song100"))
    write(out, "corpus/zh/lunyu.txt", poetry(src, "lunyu/lunyu.json"))
    write(out, "corpus/zh/shijing.txt", poetry(src, "shijing/shijing.json"))
    write(out, "corpus/zh/chuci.txt", poetry(src, "chuci/chuci.json"))
    write(out, "corpus/zh/mengzi.txt", poetry(src, "sishuwujing/mengzi.json"))
    write(out, "corpus/zh/daxue-zhongyong.txt",
          poetry(src, "sishuwujing/daxue.json") + poetry(src, "sishuwujing/zhongyong.json"))


if __name__ == "__main__":
    main()
