#include "data/tokenizer.h"

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_set>

#include "core/check.h"
#include "core/file_io.h"
#include "data/pretokenize.h"

namespace sp::data {

void PairRanks::build(const std::vector<Merge>& merges) {
  size_t cap = 16;
  while (cap < 2 * merges.size() + 2) cap <<= 1;
  slots_.assign(cap, Slot{});
  mask_ = cap - 1;
  shift_ = 64 - std::countr_zero(cap);
  for (size_t r = 0; r < merges.size(); ++r) {
    const uint64_t key = ((static_cast<uint64_t>(merges[r].left) << 32) | merges[r].right) + 1;
    size_t h = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    while (slots_[h].key != 0 && slots_[h].key != key) h = (h + 1) & mask_;
    if (slots_[h].key == 0) slots_[h] = {key, static_cast<int64_t>(r)};  // first (lowest) rank wins
  }
}

void bpe_merge_naive(const PairRanks& ranks, std::vector<uint32_t>& t) {
  while (t.size() >= 2) {
    int64_t best = -1;
    for (size_t i = 0; i + 1 < t.size(); ++i) {
      const int64_t r = ranks.find(t[i], t[i + 1]);
      if (r >= 0 && (best < 0 || r < best)) best = r;
    }
    if (best < 0) return;
    // The pair of rank `best` is the only one whose lookup gives `best`; merge it left to right.
    size_t out = 0;
    for (size_t i = 0; i < t.size();) {
      if (i + 1 < t.size() && ranks.find(t[i], t[i + 1]) == best) {
        t[out++] = kFirstMergeId + static_cast<uint32_t>(best);
        i += 2;
      } else {
        t[out++] = t[i++];
      }
    }
    t.resize(out);
  }
}

void bpe_merge_heap(const PairRanks& ranks, std::vector<uint32_t>& t) {
  const size_t n = t.size();
  if (n < 2) return;
  constexpr uint32_t kNone = UINT32_MAX;
  std::vector<uint32_t> prev(n), next(n);
  std::vector<char> alive(n, 1);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = i == 0 ? kNone : static_cast<uint32_t>(i - 1);
    next[i] = i + 1 == n ? kNone : static_cast<uint32_t>(i + 1);
  }
  // Min-heap on (rank, position): lower ranks first, leftmost first among equal ranks, which is
  // exactly the naive loop's left-to-right pass (pairs made by a merge of rank r rank above r).
  using Entry = std::pair<int64_t, uint32_t>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> heap;
  for (size_t i = 0; i + 1 < n; ++i) {
    const int64_t r = ranks.find(t[i], t[i + 1]);
    if (r >= 0) heap.push({r, static_cast<uint32_t>(i)});
  }
  while (!heap.empty()) {
    const auto [r, p] = heap.top();
    heap.pop();
    if (!alive[p] || next[p] == kNone) continue;
    const uint32_t q = next[p];
    if (ranks.find(t[p], t[q]) != r) continue;  // stale: the pair at p changed
    t[p] = kFirstMergeId + static_cast<uint32_t>(r);
    alive[q] = 0;
    next[p] = next[q];
    if (next[q] != kNone) prev[next[q]] = p;
    if (prev[p] != kNone) {
      const int64_t rl = ranks.find(t[prev[p]], t[p]);
      if (rl >= 0) heap.push({rl, prev[p]});
    }
    if (next[p] != kNone) {
      const int64_t rr = ranks.find(t[p], t[next[p]]);
      if (rr >= 0) heap.push({rr, p});
    }
  }
  size_t out = 0;
  for (size_t i = 0; i < n; ++i)
    if (alive[i]) t[out++] = t[i];
  t.resize(out);
}

Result<Tokenizer> Tokenizer::from_merges(std::vector<Merge> merges) {
  if (static_cast<int64_t>(merges.size()) + kFirstMergeId > kMaxVocabSize)
    return invalid_argument("tokenizer has {} merges; the vocabulary limit is {}", merges.size(), kMaxVocabSize);
  Tokenizer tok;
  tok.bytes_.reserve(kFirstMergeId + merges.size());
  for (uint32_t b = 0; b < kByteTokens; ++b) tok.bytes_.emplace_back(1, static_cast<char>(b));
  tok.bytes_.emplace_back(kEndOfTextText);
  std::unordered_set<uint64_t> seen;
  for (size_t i = 0; i < merges.size(); ++i) {
    const Merge m = merges[i];
    const uint64_t own = kFirstMergeId + i;
    if (m.left >= own || m.right >= own)
      return corrupt("merge {} [{}, {}] refers to an id not below its own id {}", i, m.left, m.right, own);
    if (m.left == kEndOfTextId || m.right == kEndOfTextId)
      return corrupt("merge {} [{}, {}] uses the special token <|endoftext|> (id 256)", i, m.left, m.right);
    if (!seen.insert((static_cast<uint64_t>(m.left) << 32) | m.right).second)
      return corrupt("merge {} [{}, {}] repeats an earlier merge", i, m.left, m.right);
    tok.bytes_.push_back(tok.bytes_[m.left] + tok.bytes_[m.right]);
  }
  tok.merges_ = std::move(merges);
  tok.ranks_.build(tok.merges_);
  return tok;
}

Result<Tokenizer> Tokenizer::from_json(std::string_view text, const std::string& name) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt("tokenizer '{}' is not a JSON object", name);
  auto bad = [&](std::string_view key, std::string_view want) {
    return corrupt("tokenizer '{}': key '{}' must be {}", name, key, want);
  };
  if (j.value("format", "") != kTokenizerFormat) return bad("format", "\"shardproof-bpe\"");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int64_t>() != 1)
    return bad("version", "1 (the only version this build reads)");
  if (j.value("pretokenizer", "") != kPretokenizerName) return bad("pretokenizer", "\"shardproof-pretok-v1\"");
  if (!j.contains("byte_tokens") || j["byte_tokens"] != 256) return bad("byte_tokens", "256");
  const nlohmann::json want_special = nlohmann::json::array({{{"id", 256}, {"content", kEndOfTextText}}});
  if (!j.contains("special_tokens") || j["special_tokens"] != want_special)
    return bad("special_tokens", "[{\"id\": 256, \"content\": \"<|endoftext|>\"}]");
  if (!j.contains("merges") || !j["merges"].is_array()) return bad("merges", "an array of [left, right] pairs");
  std::vector<Merge> merges;
  merges.reserve(j["merges"].size());
  for (size_t i = 0; i < j["merges"].size(); ++i) {
    const auto& m = j["merges"][i];
    if (!m.is_array() || m.size() != 2 || !m[0].is_number_unsigned() || !m[1].is_number_unsigned() ||
        m[0].get<uint64_t>() > UINT32_MAX || m[1].get<uint64_t>() > UINT32_MAX)
      return corrupt("tokenizer '{}': merge {} is not a pair of non-negative ids", name, i);
    merges.push_back({m[0].get<uint32_t>(), m[1].get<uint32_t>()});
  }
  if (!j.contains("vocab_size") || !j["vocab_size"].is_number_integer() ||
      j["vocab_size"].get<int64_t>() != static_cast<int64_t>(kFirstMergeId + merges.size()))
    return corrupt("tokenizer '{}': vocab_size must be 257 + number of merges = {}", name,
                   kFirstMergeId + merges.size());
  auto tok = from_merges(std::move(merges));
  if (!tok.ok()) return tok.status().with_context(fmt::format("tokenizer '{}'", name));
  return tok;
}

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  SP_ASSIGN_OR_RETURN(std::string text, read_file(path, uint64_t{256} << 20));
  return from_json(text, path);
}

std::string Tokenizer::to_json() const {
  std::string out = fmt::format(
      "{{\n  \"format\": \"{}\",\n  \"version\": 1,\n  \"pretokenizer\": \"{}\",\n  \"vocab_size\": {},\n"
      "  \"byte_tokens\": 256,\n  \"special_tokens\": [{{\"id\": 256, \"content\": \"{}\"}}],\n  \"merges\": [",
      kTokenizerFormat, kPretokenizerName, vocab_size(), kEndOfTextText);
  for (size_t i = 0; i < merges_.size(); ++i)
    out += fmt::format("{}\n    [{}, {}]", i == 0 ? "" : ",", merges_[i].left, merges_[i].right);
  out += merges_.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

void Tokenizer::encode_append(std::string_view text, std::vector<uint32_t>& out) const {
  std::vector<uint32_t> piece;
  pretokenize_each(text, [&](size_t b, size_t e) {
    if (e - b == 1) {
      out.push_back(static_cast<unsigned char>(text[b]));
      return;
    }
    piece.clear();
    for (size_t i = b; i < e; ++i) piece.push_back(static_cast<unsigned char>(text[i]));
    if (piece.size() <= 24)
      bpe_merge_naive(ranks_, piece);
    else
      bpe_merge_heap(ranks_, piece);
    out.insert(out.end(), piece.begin(), piece.end());
  });
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> out;
  out.reserve(text.size() / 3 + 1);
  encode_append(text, out);
  return out;
}

std::string Tokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  for (uint32_t id : ids) {
    SP_CHECK(id < bytes_.size(), "token id {} is outside the vocabulary of {}", id, bytes_.size());
    out += bytes_[id];
  }
  return out;
}

}  // namespace sp::data
