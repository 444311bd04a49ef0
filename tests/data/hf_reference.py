"""An independent Hugging Face tokenizer.json writer and BPE encoder, for tests/data/tokenizers_test.py.

Not shardproof's code (src/data/hf_tokenizer.cc): written from the `tokenizers` library's documented
behaviour, in the simplest form, so that the two can be compared on a whole corpus.
  - `from_sentencepiece(vocab_lines)`: the tokenizer.json that `transformers`' LLaMA converter writes for a
    SentencePiece BPE model (normalizer Prepend("▁") + Replace(" ", "▁"), no pre-tokenizer, BPE with byte
    fallback, <unk>/<s>/</s> as added tokens), merges ordered as its SentencePieceExtractor orders them:
    by the score of the merged piece (highest first), then by the ids of the two halves;
  - `Encoder(tokenizer_json).encode(text)`: normalize, one symbol per character (its id, else its UTF-8 bytes
    as <0xXX>, else <unk>), then the naive loop — find the adjacent pair of lowest merge rank, merge its
    leftmost occurrence, repeat — which is what the library's heap computes. For speed the normalized text
    is cut before every "▁" that follows another character and each chunk is encoded alone (and cached):
    exact when no vocabulary piece holds "▁" after another character, which the constructor asserts (a
    SentencePiece vocabulary splits by whitespace, so none does).
Standard library only (Debian's /usr/bin/python3).
"""


def from_sentencepiece(vocab_lines):
    """`spm_export_vocab` output (piece TAB score per line, in id order) → tokenizer.json as a dict."""
    pieces = []
    for line in vocab_lines:
        if not line:
            continue
        piece, score = line.rsplit("\t", 1)
        pieces.append((piece, float(score)))
    vocab = {p: i for i, (p, _) in enumerate(pieces)}
    merges = []
    for merged, score in pieces:  # the extractor: every split of a piece into two pieces of the vocab
        local = [(merged[:k], merged[k:], score) for k in range(1, len(merged))
                 if merged[:k] in vocab and merged[k:] in vocab]
        local.sort(key=lambda m: (vocab[m[0]], vocab[m[1]]))
        merges.extend(local)
    merges.sort(key=lambda m: m[2], reverse=True)  # stable: ties keep the order above
    special = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True} for t in ("<unk>", "<s>", "</s>")]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": special,
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                      {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b, _ in merges]},
    }


class Encoder:
    """The reference encoder of one tokenizer.json (the subset tokenizers_test.py writes)."""

    def __init__(self, tj):
        m = tj["model"]
        self.vocab = dict(m["vocab"])
        for a in tj.get("added_tokens") or []:
            self.vocab[a["content"]] = a["id"]
        self.rank = {}
        for i, mg in enumerate(m["merges"]):
            a, b = mg.split(" ") if isinstance(mg, str) else mg
            self.rank[(a, b)] = i
        self.byte_fallback = m.get("byte_fallback", False)
        self.unk = m.get("unk_token")
        assert not any("\u2581" in p.lstrip("\u2581") for p in self.vocab), "a piece with an inner ▁"
        self.cache = {}
        self.norm = []
        n = tj.get("normalizer")
        for step in (n["normalizers"] if n and n["type"] == "Sequence" else [n] if n else []):
            self.norm.append(step)

    def normalize(self, text):
        for step in self.norm:
            if step["type"] == "Prepend":
                text = step["prepend"] + text if text else text
            elif step["type"] == "Replace":
                text = text.replace(step["pattern"]["String"], step["content"])
        return text

    def encode(self, text):
        text = self.normalize(text)
        ids, begin = [], 0
        for i in range(1, len(text) + 1):
            if i == len(text) or (text[i] == "\u2581" and text[i - 1] != "\u2581"):
                chunk = text[begin:i]
                if chunk not in self.cache:
                    self.cache[chunk] = self.encode_chunk(chunk)
                ids.extend(self.cache[chunk])
                begin = i
        return ids

    def encode_chunk(self, chunk):
        symbols = []  # strings
        for ch in chunk:
            if ch in self.vocab:
                symbols.append(ch)
            elif self.byte_fallback:
                symbols.extend("<0x%02X>" % b for b in ch.encode("utf-8"))
            elif not (symbols and symbols[-1] == self.unk):
                symbols.append(self.unk)
        while len(symbols) > 1:
            best, at = None, -1
            for i in range(len(symbols) - 1):
                r = self.rank.get((symbols[i], symbols[i + 1]))
                if r is not None and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            symbols[at:at + 2] = [symbols[at] + symbols[at + 1]]
        return [self.vocab[s] for s in symbols]
