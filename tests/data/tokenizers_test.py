#!/usr/bin/env python3
"""A LLaMA user's own tokenizer in `data prepare` (docs/data.md §"A user's tokenizer").

Cases (CASE --bin shardproof --work DIR):
  encode    a SentencePiece BPE model trained by `spm_train` on the bundled corpus (LLaMA-2's settings, vocab
            2048, byte fallback) encodes every line of every corpus file exactly as `spm_encode` does; the
            tokenizer.json that transformers' LLaMA converter would write for it (hf_reference.py) encodes every
            line exactly as the reference encoder written in hf_reference.py does, and as spm_encode does; a
            hand-written small BPE encodes to the ids written out below; bad tokenizer files exit 2 naming the key
            (inside `model` too); an empty file and a SentencePiece model cut short exit 2 in our words.
  prepare   `data prepare --tokenizer` with each: the manifest names the copied file and its kind, the lineage
            and the dataset identity carry the file's SHA-256, the shards hold exactly the encoded documents
            followed by </s>; a vocabulary size other than the tokenizer's is refused naming data.vocab_size;
            `train --init-from` weights of another vocabulary are refused naming the tokenizer.
  prove     `prove --preset demo` on data prepared with each tokenizer PASSes, and the proof's contract binds
            the tokenizer file's SHA-256.
"""
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_reference  # noqa: E402
import sp_test as T  # noqa: E402

CORPUS = [os.path.join(T.source_dir("data", "corpus"), lang, f)
          for lang in ("en", "zh") for f in sorted(os.listdir(T.source_dir("data", "corpus", lang)))]

# LLaMA-2's tokenizer.model settings (its trainer_spec), at a vocabulary the demo preset uses.
SPM_TRAIN = ["--model_type=bpe", "--vocab_size=2048", "--byte_fallback=true", "--character_coverage=0.98",
             "--split_digits=true", "--normalization_rule_name=identity", "--add_dummy_prefix=true",
             "--remove_extra_whitespaces=false", "--allow_whitespace_only_pieces=true", "--unk_id=0", "--bos_id=1",
             "--eos_id=2", "--pad_id=-1", "--num_threads=1", "--max_sentence_length=16384"]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def tokenizers(work):
    """(tokenizer.model trained by spm_train on the corpus, the tokenizer.json converted from it)."""
    model = os.path.join(work, "llama-like.model")
    T.run_ok(["spm_train", "--input=" + ",".join(CORPUS), "--model_prefix=" + model[:-len(".model")]] + SPM_TRAIN,
             timeout=300)
    vocab = T.run_ok(["spm_export_vocab", "--model=" + model]).stdout.split("\n")
    path = os.path.join(work, "tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(hf_reference.from_sentencepiece(vocab), f, ensure_ascii=False, indent=1)
    return model, path


# A hand-written BPE: <unk> <s> </s>, the 256 byte tokens <0x00>..<0xFF> (ids 3..258), then pieces and merges.
SMALL_PIECES = ["\u2581", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "llo", "\u2581he", "\u2581hello", "or"]
SMALL_MERGES = ["h e", "l l", "ll o", "\u2581 he", "\u2581he llo", "o r"]
# Worked out by hand from the merge ranks (rank 0 first, leftmost first):
#   "hello world" → ▁ h e l l o ▁ w o r l d → he → ll → llo → ▁he → ▁hello → or: ▁hello ▁ w or l d
#   "hello wé"   → é is not a piece: its bytes C3 A9 (byte fallback) → ▁hello ▁ w <0xC3> <0xA9>
#   "lll"        → ▁ l l l → "l l" at the leftmost pair only: ▁ ll l
SMALL_EXPECTED = {"hello world": [271, 259, 264, 272, 262, 266], "hello w\u00e9": [271, 259, 264, 3 + 0xC3, 3 + 0xA9],
                  "lll": [259, 268, 262], "": []}


def small_tokenizer():
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({"<0x%02X>" % b: 3 + b for b in range(256)})
    vocab.update({p: 259 + i for i, p in enumerate(SMALL_PIECES)})
    return {"version": "1.0", "added_tokens": [{"id": 2, "content": "</s>", "special": True}],
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "\u2581"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
            "pre_tokenizer": None, "post_processor": None, "decoder": None,
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                      "vocab": vocab, "merges": SMALL_MERGES}}


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    return path


def case_encode(a):
    work = T.fresh(os.path.join(a.work, "encode"), create=True)
    model, tj = tokenizers(work)
    ref = hf_reference.Encoder(json.load(open(tj, encoding="utf-8")))
    lines_total, json_vs_spm = 0, 0
    for path in CORPUS:
        spm = T.run_ok(["spm_encode", "--model=" + model, "--output_format=id", "--input=" + path]).stdout.split("\n")
        ours = T.run_ok([a.bin, "data", "encode", "--tokenizer", model, path]).stdout.split("\n")
        T.check(len(spm) == len(ours), f"{path}: spm_encode gave {len(spm)} lines, data encode {len(ours)}")
        for i, (x, y) in enumerate(zip(spm, ours)):
            T.check(x == y, f"{path}:{i + 1}: tokenizer.model: spm_encode {x[:80]!r}, data encode {y[:80]!r}")
        ours_json = T.run_ok([a.bin, "data", "encode", "--tokenizer", tj, path]).stdout.split("\n")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.split("\n")
        if text.endswith("\n"):
            lines = lines[:-1]
        T.check(len(ours_json) == len(lines) + 1, f"{path}: {len(lines)} lines, data encode gave {len(ours_json) - 1}")
        for i, line in enumerate(lines):
            want = " ".join(str(t) for t in ref.encode(line))
            T.check(ours_json[i] == want, f"{path}:{i + 1}: tokenizer.json: reference {want[:80]!r}, "
                                          f"data encode {ours_json[i][:80]!r}")
            json_vs_spm += ours_json[i] == spm[i]
        lines_total += len(lines)
    print(f"tokenizer.model = spm_encode and tokenizer.json = the reference on all {lines_total} lines of "
          f"{len(CORPUS)} corpus files; tokenizer.json = spm_encode on {json_vs_spm} of them")
    T.check(json_vs_spm == lines_total, "the converted tokenizer.json differs from its SentencePiece model")

    small = write_json(os.path.join(work, "small.json"), small_tokenizer())
    text = os.path.join(work, "small.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("".join(k + "\n" for k in SMALL_EXPECTED))
    got = T.run_ok([a.bin, "data", "encode", "--tokenizer", small, text]).stdout.split("\n")
    for i, (k, want) in enumerate(SMALL_EXPECTED.items()):
        T.check(got[i] == " ".join(map(str, want)), f"small BPE, {k!r}: want {want}, got {got[i]!r}")

    bad = {  # (edit of the small tokenizer, what the message must name)
        "pre_tokenizer": ({"pre_tokenizer": {"type": "ByteLevel"}}, "pre_tokenizer: ByteLevel"),
        "unigram": ({"model": {"type": "Unigram"}}, "model.type: \"Unigram\" is not supported"),
        "nfkc": ({"normalizer": {"type": "NFKC"}}, "normalizer: type \"NFKC\" is not supported"),
        "merge": ({"merges": SMALL_MERGES + ["w d"]}, "model.merges[6]: \"w\" + \"d\": wd is not in model.vocab"),
        "no_byte": ({"drop_byte": "<0x41>"}, "the byte token <0x41> is not in the vocab"),
        "unknown": ({"extra": 1}, "extra: unknown key"),
        # Inside `model` too (issue 45: only the top level was checked).
        "model_unknown": ({"model_extra": 1}, "model.extra: unknown key"),
    }
    for name, (edit, needle) in bad.items():
        t = small_tokenizer()
        if "model" in edit and "type" in edit["model"]:
            t["model"]["type"] = edit["model"]["type"]
        elif "merges" in edit:
            t["model"]["merges"] = edit["merges"]
        elif "drop_byte" in edit:
            del t["model"]["vocab"][edit["drop_byte"]]
        elif "extra" in edit:
            t["extra"] = 1
        elif "model_extra" in edit:
            t["model"]["extra"] = 1
        else:
            t.update(edit)
        p = T.run([a.bin, "data", "encode", "--tokenizer", write_json(os.path.join(work, name + ".json"), t), text])
        T.check(p.returncode == 2 and needle in p.stderr, f"bad tokenizer {name}: exit {p.returncode}, "
                                                          f"expected 2 naming {needle!r}:\n{p.stderr}")
    p = T.run([a.bin, "data", "encode", "--tokenizer", text, text])  # text is not a SentencePiece model
    T.check(p.returncode == 2 and "is not a complete SentencePiece model" in p.stderr, f"not a model: {p.stderr}")
    damaged_files(a, work, model, text)


def damaged_files(a, work, model, text):
    """An empty tokenizer.json and a SentencePiece model cut short are named as such in our words, never by
    SentencePiece's internals ("unk is not defined", "byte piece <0x00> is found", issue 45). The cuts: inside
    the pieces, inside a piece's field, and exactly where the trainer_spec begins (the pieces whole)."""
    raw = open(model, "rb").read()
    # The byte where field 2 (trainer_spec) starts: walk the pieces (field 1, length-delimited) from the start.
    at, starts = 0, []
    while raw[at] == 0x0A:
        starts.append(at)
        at += 1
        n, shift = 0, 0
        while True:
            b = raw[at]
            at += 1
            n |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        at += n
    T.check(raw[at] == 0x12, f"{model}: byte {at} is not the trainer_spec's key")
    files = {"empty.json": (b"", "is empty (0 bytes)"), "blank.json": (b" \n\n", "is empty (3 bytes, all whitespace)"),
             # cut inside the middle piece (2 bytes past its key: inside its length or its payload), never exactly
             # at a field's boundary, which a cut at len // 2 hit by chance and which reads as 'ends after ...'
             "half.model": (raw[:starts[len(starts) // 2] + 2], "runs past the end of the file"),
             "one_byte_short.model": (raw[:-1], "runs past the end of the file"),
             "no_trainer_spec.model": (raw[:at], "it ends after the pieces without the trainer_spec")}
    for name, (data, needle) in files.items():
        path = os.path.join(work, name)
        with open(path, "wb") as f:
            f.write(data)
        p = T.run([a.bin, "data", "encode", "--tokenizer", path, text])
        T.check(p.returncode == 2 and needle in p.stderr and name in p.stderr,
                f"{name}: exit {p.returncode}, expected 2 naming the file and {needle!r}:\n{p.stderr}")
        for internal in ("unk is not defined", "byte piece", "SentencePiece:"):
            T.check(internal not in p.stderr, f"{name}: SentencePiece's own words {internal!r}:\n{p.stderr}")


def prepared(a, work, tokenizer, vocab=2048):
    out = os.path.join(work, "prep-" + os.path.basename(tokenizer))
    T.fresh(out)
    return T.run([a.bin, "data", "prepare", "--sources", T.source_dir("data", "sources.json"), "--out", out,
                  "--tokenizer", tokenizer, "--vocab-size", str(vocab)]), out


def case_prepare(a):
    work = T.fresh(os.path.join(a.work, "prepare"), create=True)
    model, tj = tokenizers(work)
    for tok, kind, file in ((model, "sentencepiece", "tokenizer.model"), (tj, "hf-tokenizer-json", "tokenizer.json")):
        p, out = prepared(a, work, tok)
        T.check(p.returncode == 0, f"data prepare --tokenizer {tok}: exit {p.returncode}\n{p.stderr}")
        man = T.read_json(os.path.join(out, "manifest.json"))
        lin = T.read_json(os.path.join(out, "lineage.json"))
        sha = sha256(tok)
        T.check(man["tokenizer"] == {"file": file, "sha256": sha, "kind": kind}, f"manifest tokenizer {man['tokenizer']}")
        T.check(sha256(os.path.join(out, file)) == sha, "the copied tokenizer differs from the given file")
        T.check(lin["tokenizer"]["sha256"] == sha and lin["identity"]["tokenizer_sha256"] == sha,
                "lineage.json does not carry the tokenizer file's SHA-256")
        T.check(man["eot_id"] == 2 and lin["tokenizer"]["eos_token"] == "</s>", f"eot {man['eot_id']}")
        # Every train document's tokens: its text encoded, then </s>; the lineage counts them.
        docs = [json.loads(l) for l in open(os.path.join(out, "lineage.jsonl"), encoding="utf-8")]
        kept = sum(d["tokens"] for d in docs if d["split"] == "train")
        T.check(kept == man["splits"]["train"]["num_tokens"], f"lineage tokens {kept} vs shards")
        T.check(man["splits"]["train"]["num_documents"] == sum(d["split"] == "train" for d in docs),
                "the shards' document count (</s> tokens) differs from the lineage's train documents")
        v = T.run([a.bin, "data", "verify", out])
        T.check(v.returncode == 0, f"data verify {out}: {v.stderr}")
    p, _ = prepared(a, work, model, vocab=4096)
    T.check(p.returncode == 2 and "has 2048 tokens but the vocabulary size is 4096" in p.stderr and
            "data.vocab_size = 2048" in p.stderr, f"vocab mismatch: exit {p.returncode}\n{p.stderr}")
    # --init-from weights of another vocabulary: refused naming the tokenizer, before anything is written.
    run = os.path.join(work, "v1024")
    T.run_ok([a.bin, "train", "--preset", "tiny", "--out", run, "--quiet", "--set", "train.steps=1",
              "--set", "data.vocab_size=1024", "--set", "train.eval_every=0", "--set", "train.eval_batches=0",
              "--set", "evidence.checkpoint_every=1",
              "--set", "parallel.dp=1", "--set", "parallel.tp=1", "--set", "parallel.pp=1", "--set", "parallel.zero=0"])
    hf = os.path.join(work, "v1024-hf")
    T.run_ok([a.bin, "ckpt", "export", run, "--hf", hf])
    out = os.path.join(work, "init")
    p = T.run([a.bin, "train", "--preset", "tiny", "--out", out, "--quiet", "--init-from", hf, "--set",
               "data.tokenizer=" + model, "--set", "train.steps=1", "--set", "parallel.dp=1", "--set",
               "parallel.tp=1", "--set", "parallel.pp=1", "--set", "parallel.zero=0"])
    T.check(p.returncode == 2 and f"against the tokenizer '{model}' (2048 tokens)" in p.stderr,
            f"--init-from of a 1024-token checkpoint with a 2048-token tokenizer: exit {p.returncode}\n{p.stderr}")
    T.check(not os.path.exists(out) or not os.listdir(out), "--out was written although the run was refused")


def case_prove(a):
    work = T.fresh(os.path.join(a.work, "prove"), create=True)
    model, tj = tokenizers(work)
    for tok in (model, tj):
        out = os.path.join(work, "proof-" + os.path.basename(tok))
        p = T.run([a.bin, "prove", "--preset", "demo", "--out", out, "--cache", os.path.join(work, "cache"),
                   "--set", "data.tokenizer=" + tok], timeout=900)
        if p.returncode != 0 or "PASS" not in p.stdout:
            T.show(p, tail=3000)
            T.fail(f"prove --preset demo with data.tokenizer={tok} exited {p.returncode}")
        contract = T.read_json(os.path.join(out, "contract.json"))
        T.check(json.dumps(contract).count(sha256(tok)) >= 1, "the contract does not bind the tokenizer's SHA-256")
        print(f"prove --preset demo with {os.path.basename(tok)}: PASS")


if __name__ == "__main__":
    args = T.case_args(["encode", "prepare", "prove"], __doc__)
    sys.exit(T.run_case(args.case,
                        lambda: {"encode": case_encode, "prepare": case_prepare, "prove": case_prove}[args.case](args)))
