#include "data/hf_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <queue>
#include <unordered_map>
#include <vector>

#include "data/tokenizer.h"

namespace sp::data {
namespace {

struct HfNormalizerStep {
  bool prepend = false;  // Prepend{prepend = a}, else Replace{pattern.String = a, content = b}
  std::string a, b;
};

struct HfMergeRule {
  uint32_t rank = 0;
  uint32_t id = 0;  // the merged token's id
};

uint64_t hf_pair_key(uint32_t left, uint32_t right) { return (static_cast<uint64_t>(left) << 32) | right; }

void hf_replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  std::string out;
  out.reserve(s.size());
  size_t at = 0;
  for (size_t hit; (hit = s.find(from, at)) != std::string::npos; at = hit + from.size()) {
    out.append(s, at, hit - at);
    out += to;
  }
  out.append(s, at, std::string::npos);
  s = std::move(out);
}

// Bytes of the UTF-8 character starting at s[i]: 1 for ASCII and for a byte that starts no valid sequence.
size_t hf_char_bytes(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  return n;
}

class HfBpe : public TextEncoder {
 public:
  std::string_view kind() const override { return "hf-tokenizer-json"; }
  int64_t vocab_size() const override { return vocab_size_; }
  uint32_t eos_id() const override { return eos_; }
  std::string eos_token() const override { return eos_token_; }
  void encode_append(std::string_view text, std::vector<uint32_t>& out) const override;

  std::unordered_map<std::string, uint32_t> vocab;
  std::unordered_map<uint64_t, HfMergeRule> merges;
  std::array<int64_t, 256> byte_ids{};  // id of <0xXX>, or -1
  bool byte_fallback = false, fuse_unk = false, ignore_merges = false;
  std::optional<uint32_t> unk;
  std::vector<HfNormalizerStep> normalizer;
  bool metaspace = false, metaspace_prepend = false, metaspace_split = false;
  std::string replacement;
  int64_t vocab_size_ = 0;
  uint32_t eos_ = 0;
  std::string eos_token_;

 private:
  void encode_word(std::string_view word, std::vector<uint32_t>& out) const;
};

void HfBpe::encode_append(std::string_view text, std::vector<uint32_t>& out) const {
  std::string s(text);
  for (const HfNormalizerStep& n : normalizer) {
    if (n.prepend) {
      if (!s.empty()) s = n.a + s;  // tokenizers' Prepend leaves an empty string empty
    } else {
      hf_replace_all(s, n.a, n.b);
    }
  }
  if (!metaspace) return encode_word(s, out);
  hf_replace_all(s, " ", replacement);
  if (metaspace_prepend && s.rfind(replacement, 0) != 0) s = replacement + s;
  if (!metaspace_split) return encode_word(s, out);
  // Split with the delimiter merged with the next piece: "▁a▁▁b" → "▁a", "▁", "▁b".
  size_t begin = 0;
  for (size_t at = s.find(replacement, 1); at != std::string::npos; at = s.find(replacement, at + 1)) {
    if (at > begin) encode_word(std::string_view(s).substr(begin, at - begin), out);
    begin = at;
  }
  if (begin < s.size()) encode_word(std::string_view(s).substr(begin), out);
}

void HfBpe::encode_word(std::string_view word, std::vector<uint32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges)
    if (auto it = vocab.find(std::string(word)); it != vocab.end()) return out.push_back(it->second);
  // The symbols, a doubly linked list over one array; a merged-away symbol is marked dead.
  struct Symbol {
    uint32_t id;
    int64_t prev, next;
    bool alive;
  };
  std::vector<Symbol> sym;
  auto add = [&](uint32_t id) {
    const auto n = static_cast<int64_t>(sym.size());
    sym.push_back({id, n - 1, n + 1, true});
  };
  int64_t pending_unk = -1;  // an unknown character not yet added (fuse_unk joins a run of them); -1: none
  for (size_t i = 0; i < word.size();) {
    const size_t n = hf_char_bytes(word, i);
    const std::string ch(word.substr(i, n));
    i += n;
    if (auto it = vocab.find(ch); it != vocab.end()) {
      if (pending_unk >= 0) add(static_cast<uint32_t>(pending_unk)), pending_unk = -1;
      add(it->second);
    } else if (byte_fallback) {  // load() checked that all 256 byte tokens exist
      for (unsigned char b : ch) add(static_cast<uint32_t>(byte_ids[b]));
    } else if (!fuse_unk || pending_unk < 0) {  // load() checked that unk exists without byte fallback
      if (pending_unk >= 0) add(static_cast<uint32_t>(pending_unk));
      pending_unk = *unk;
    }
  }
  if (pending_unk >= 0) add(static_cast<uint32_t>(pending_unk));
  if (!sym.empty()) sym.back().next = -1;
  // Merge: the pair of lowest rank first, the leftmost of equal ranks; an entry whose pair changed since it
  // was queued is skipped (tokenizers' Word::merge_all).
  struct Candidate {
    uint32_t rank;
    int64_t pos;
    uint32_t id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto consider = [&](int64_t pos) {
    const int64_t next = sym[static_cast<size_t>(pos)].next;
    if (next < 0) return;
    auto it = merges.find(hf_pair_key(sym[static_cast<size_t>(pos)].id, sym[static_cast<size_t>(next)].id));
    if (it != merges.end()) queue.push({it->second.rank, pos, it->second.id});
  };
  for (int64_t p = 0; p + 1 < static_cast<int64_t>(sym.size()); ++p) consider(p);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = sym[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[static_cast<size_t>(left.next)];
    auto it = merges.find(hf_pair_key(left.id, right.id));
    if (it == merges.end() || it->second.id != top.id) continue;  // stale
    left.id = top.id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (const Symbol& s : sym)
    if (s.alive) out.push_back(s.id);
}

// --- reading tokenizer.json -------------------------------------------------------------------------------

class HfReader {
 public:
  explicit HfReader(std::string name) : name_(std::move(name)) {}
  Status refuse(const std::string& key, const std::string& why, const std::string& hint = "") const {
    Status s = invalid_argument("tokenizer '{}': {}: {}", name_, key, why);
    return hint.empty() ? s.with_hint("supported: BPE with byte fallback, as LLaMA-1/2 ship it (docs/data.md)")
                        : s.with_hint(hint);
  }
  Status normalizer(const nlohmann::json& j, HfBpe& t) const;
  Status pre_tokenizer(const nlohmann::json& j, HfBpe& t) const;
  Status model(const nlohmann::json& j, HfBpe& t) const;
  Status added_tokens(const nlohmann::json& j, HfBpe& t) const;

 private:
  std::string name_;
};

Status HfReader::normalizer(const nlohmann::json& j, HfBpe& t) const {
  if (j.is_null()) return Status();
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    return refuse("normalizer", "must be null or an object with a \"type\"");
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      return refuse("normalizer.normalizers", "must be an array");
    for (const auto& n : j["normalizers"]) SP_RETURN_IF_ERROR(normalizer(n, t));
    return Status();
  }
  if (type == "Prepend" && j.contains("prepend") && j["prepend"].is_string()) {
    t.normalizer.push_back({true, j["prepend"].get<std::string>(), ""});
    return Status();
  }
  if (type == "Replace" && j.contains("pattern") && j["pattern"].is_object() && j["pattern"].contains("String") &&
      j["pattern"]["String"].is_string() && j.contains("content") && j["content"].is_string()) {
    t.normalizer.push_back({false, j["pattern"]["String"].get<std::string>(), j["content"].get<std::string>()});
    return Status();
  }
  return refuse("normalizer", fmt::format("type \"{}\" is not supported (only Prepend and Replace of a String, as "
                                          "LLaMA's tokenizer.json has)",
                                          type));
}

Status HfReader::pre_tokenizer(const nlohmann::json& j, HfBpe& t) const {
  if (j.is_null()) return Status();
  const std::string type =
      j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : std::string("?");
  if (type == "ByteLevel")
    return refuse("pre_tokenizer", "ByteLevel (byte-level BPE with a regex split, as LLaMA-3's) is not supported",
                  "give a SentencePiece-style tokenizer (LLaMA-1/2), or let data prepare train its own BPE");
  if (type != "Metaspace")
    return refuse("pre_tokenizer", fmt::format("type \"{}\" is not supported (only null and Metaspace)", type));
  if (!j.contains("replacement") || !j["replacement"].is_string() || j["replacement"].get<std::string>().empty())
    return refuse("pre_tokenizer.replacement", "must be a non-empty string");
  t.metaspace = true;
  t.replacement = j["replacement"].get<std::string>();
  std::string scheme = j.value("add_prefix_space", true) ? "always" : "never";
  if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) scheme = j["prepend_scheme"].get<std::string>();
  // "first" prepends to the first pre-token of the input only; data prepare encodes a whole document at once.
  if (scheme != "always" && scheme != "first" && scheme != "never")
    return refuse("pre_tokenizer.prepend_scheme", fmt::format("\"{}\" is not always, first or never", scheme));
  t.metaspace_prepend = scheme != "never";
  t.metaspace_split = j.value("split", true);
  return Status();
}

Status HfReader::model(const nlohmann::json& m, HfBpe& t) const {
  if (!m.is_object() || m.value("type", std::string("BPE")) != "BPE")
    return refuse(
        "model.type",
        fmt::format("\"{}\" is not supported (only BPE)", m.is_object() ? m.value("type", std::string("?")) : "?"),
        "a SentencePiece unigram model: give its tokenizer.model instead");
  // The keys `tokenizers` writes for a BPE model (tokenizers/src/models/bpe/serialization.rs); any other may
  // change the encoding in a way this reader would not see.
  static const std::vector<std::string> kModelKeys = {"type",
                                                      "dropout",
                                                      "unk_token",
                                                      "continuing_subword_prefix",
                                                      "end_of_word_suffix",
                                                      "fuse_unk",
                                                      "byte_fallback",
                                                      "ignore_merges",
                                                      "vocab",
                                                      "merges"};
  for (const auto& [k, v] : m.items())
    if (std::find(kModelKeys.begin(), kModelKeys.end(), k) == kModelKeys.end())
      return refuse("model." + k, "unknown key: shardproof does not know whether it changes the encoding",
                    "remove it if the tokenizer was edited by hand; a BPE model holds only type, dropout, unk_token, "
                    "continuing_subword_prefix, end_of_word_suffix, fuse_unk, byte_fallback, ignore_merges, vocab "
                    "and merges");
  if (m.contains("dropout") && !m["dropout"].is_null() && !(m["dropout"].is_number() && m["dropout"] == 0))
    return refuse("model.dropout", "BPE dropout makes encoding random; it must be null or 0");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null() && !(m[k].is_string() && m[k].get<std::string>().empty()))
      return refuse(std::string("model.") + k, "must be null (a WordPiece-style BPE is not supported)");
  if (!m.contains("vocab") || !m["vocab"].is_object()) return refuse("model.vocab", "must be an object token → id");
  std::unordered_map<uint32_t, std::string> seen;
  for (const auto& [tok, id] : m["vocab"].items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() >= static_cast<uint64_t>(kMaxVocabSize))
      return refuse("model.vocab",
                    fmt::format("\"{}\" has id {}, not an integer in [0, {})", tok, id.dump(), kMaxVocabSize));
    const auto v = id.get<uint32_t>();
    if (auto [it, fresh] = seen.emplace(v, tok); !fresh)
      return refuse("model.vocab", fmt::format("id {} is given to both \"{}\" and \"{}\"", v, it->second, tok));
    t.vocab.emplace(tok, v);
    t.vocab_size_ = std::max<int64_t>(t.vocab_size_, int64_t{v} + 1);
  }
  t.byte_fallback = m.value("byte_fallback", false);
  t.fuse_unk = m.value("fuse_unk", false);
  t.ignore_merges = m.value("ignore_merges", false);
  if (m.contains("unk_token") && m["unk_token"].is_string()) {
    auto it = t.vocab.find(m["unk_token"].get<std::string>());
    if (it == t.vocab.end()) return refuse("model.unk_token", "is not in model.vocab");
    t.unk = it->second;
  }
  t.byte_ids.fill(-1);
  for (int b = 0; b < 256; ++b)
    if (auto it = t.vocab.find(fmt::format("<0x{:02X}>", b)); it != t.vocab.end()) t.byte_ids[b] = it->second;
  for (int b = 0; b < 256 && t.byte_fallback; ++b)
    if (t.byte_ids[b] < 0)
      return refuse("model.byte_fallback", fmt::format("is true but the byte token <0x{:02X}> is not in the vocab", b));
  if (!t.byte_fallback && !t.unk)
    return refuse("model",
                  "has neither byte_fallback nor an unk_token: a character outside the vocabulary could "
                  "not be encoded");
  if (!m.contains("merges") || !m["merges"].is_array()) return refuse("model.merges", "must be an array");
  const auto& ms = m["merges"];
  for (size_t i = 0; i < ms.size(); ++i) {
    std::string a, b;
    if (ms[i].is_string()) {  // "left right"
      const std::string s = ms[i].get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
        return refuse(fmt::format("model.merges[{}]", i), fmt::format("\"{}\" is not \"left right\"", s));
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (ms[i].is_array() && ms[i].size() == 2 && ms[i][0].is_string() && ms[i][1].is_string()) {
      a = ms[i][0].get<std::string>(), b = ms[i][1].get<std::string>();
    } else {
      return refuse(fmt::format("model.merges[{}]", i), "must be \"left right\" or [left, right]");
    }
    auto l = t.vocab.find(a), r = t.vocab.find(b), lr = t.vocab.find(a + b);
    if (l == t.vocab.end() || r == t.vocab.end() || lr == t.vocab.end())
      return refuse(fmt::format("model.merges[{}]", i), fmt::format("\"{}\" + \"{}\": {} is not in model.vocab", a, b,
                                                                    l == t.vocab.end()   ? a
                                                                    : r == t.vocab.end() ? b
                                                                                         : a + b));
    if (!t.merges.emplace(hf_pair_key(l->second, r->second), HfMergeRule{static_cast<uint32_t>(i), lr->second}).second)
      return refuse(fmt::format("model.merges[{}]", i), fmt::format("\"{} {}\" is listed twice", a, b));
  }
  return Status();
}

Status HfReader::added_tokens(const nlohmann::json& j, HfBpe& t) const {
  if (j.is_null()) return Status();
  if (!j.is_array()) return refuse("added_tokens", "must be an array");
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& a = j[i];
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_unsigned() || !a.contains("content") ||
        !a["content"].is_string() || a["id"].get<uint64_t>() >= static_cast<uint64_t>(kMaxVocabSize))
      return refuse(fmt::format("added_tokens[{}]", i), "must be an object with an id and a content");
    const auto id = a["id"].get<uint32_t>();
    const std::string content = a["content"].get<std::string>();
    auto [it, fresh] = t.vocab.emplace(content, id);
    if (!fresh && it->second != id)
      return refuse(fmt::format("added_tokens[{}]", i),
                    fmt::format("\"{}\" has id {} but model.vocab gives it {}", content, id, it->second));
    t.vocab_size_ = std::max<int64_t>(t.vocab_size_, int64_t{id} + 1);
  }
  return Status();
}

}  // namespace

Result<std::unique_ptr<TextEncoder>> load_hf_tokenizer(const nlohmann::json& j, const std::string& name) {
  const HfReader r(name);
  if (!j.is_object() || !j.contains("model")) return r.refuse("model", "missing: not a Hugging Face tokenizer.json");
  static const std::vector<std::string> kKnown = {"version",        "truncation", "padding",
                                                  "added_tokens",   "normalizer", "pre_tokenizer",
                                                  "post_processor", "decoder",    "model"};
  for (const auto& [k, v] : j.items())
    if (std::find(kKnown.begin(), kKnown.end(), k) == kKnown.end())
      return r.refuse(k, "unknown key: shardproof does not know whether it changes the encoding");
  auto t = std::make_unique<HfBpe>();
  SP_RETURN_IF_ERROR(r.model(j["model"], *t));
  SP_RETURN_IF_ERROR(r.added_tokens(j.value("added_tokens", nlohmann::json()), *t));
  SP_RETURN_IF_ERROR(r.normalizer(j.value("normalizer", nlohmann::json()), *t));
  SP_RETURN_IF_ERROR(r.pre_tokenizer(j.value("pre_tokenizer", nlohmann::json()), *t));
  for (const char* eos : {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>"})
    if (auto it = t->vocab.find(eos); it != t->vocab.end()) {
      t->eos_ = it->second;
      t->eos_token_ = eos;
      break;
    }
  if (t->eos_token_.empty())
    return r.refuse("added_tokens",
                    "has no end-of-sequence token (\"</s>\", \"<|end_of_text|>\", \"<|endoftext|>\" "
                    "or \"<eos>\"): documents could not be separated");
  if (t->vocab_size_ < kFirstMergeId)
    return r.refuse("model.vocab",
                    fmt::format("{} tokens: fewer than 257 (the shards' smallest vocabulary)", t->vocab_size_));
  return std::unique_ptr<TextEncoder>(std::move(t));
}

}  // namespace sp::data
