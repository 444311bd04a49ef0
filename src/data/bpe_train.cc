#include "data/bpe_train.h"

#include <algorithm>
#include <queue>
#include <vector>

#include "data/pretokenize.h"

namespace sp::data {
namespace {

inline uint64_t pair_key(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }

struct HeapEntry {
  int64_t count;
  uint64_t key;
};
// std::priority_queue keeps the "largest" on top: the highest count, then the smallest key.
struct HeapLess {
  bool operator()(const HeapEntry& a, const HeapEntry& b) const {
    return a.count != b.count ? a.count < b.count : a.key > b.key;
  }
};

}  // namespace

Status validate_vocab_size(int64_t vocab_size) {
  if (vocab_size < kFirstMergeId)
    return invalid_argument("vocab_size {} is smaller than 256 byte tokens + 1 special token (<|endoftext|>) = 257",
                            vocab_size)
        .with_hint("use a vocabulary size of 257 or more (the default is 2048)");
  if (vocab_size > kMaxVocabSize)
    return invalid_argument("vocab_size {} is larger than the supported {}", vocab_size, kMaxVocabSize);
  return Status();
}

void BpeTrainer::add_text(std::string_view text) {
  pretokenize_each(text, [&](size_t b, size_t e) {
    ++pieces_;
    if (e - b >= 2) ++counts_[std::string(text.substr(b, e - b))];
  });
}

Result<Tokenizer> BpeTrainer::train(int64_t vocab_size, BpeTrainStats* stats) const {
  SP_RETURN_IF_ERROR(validate_vocab_size(vocab_size));
  const int64_t target = vocab_size - kFirstMergeId;

  // Unique pieces in byte order, so word indices (and everything below) do not depend on hashing.
  std::vector<const std::pair<const std::string, int64_t>*> sorted;
  sorted.reserve(counts_.size());
  for (const auto& kv : counts_) sorted.push_back(&kv);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  std::vector<std::vector<uint32_t>> words(sorted.size());  // symbols of each unique piece
  std::vector<int64_t> weight(sorted.size());               // occurrences of each unique piece

  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;  // pair → pieces that (may) contain it
  for (size_t w = 0; w < sorted.size(); ++w) {
    const std::string& s = sorted[w]->first;
    weight[w] = sorted[w]->second;
    words[w].reserve(s.size());
    for (char c : s) words[w].push_back(static_cast<unsigned char>(c));
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint64_t k = pair_key(words[w][i], words[w][i + 1]);
      pair_count[k] += weight[w];
      where[k].push_back(static_cast<uint32_t>(w));
    }
  }
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, HeapLess> heap;
  for (const auto& [k, c] : pair_count) heap.push({c, k});

  std::vector<Merge> merges;
  merges.reserve(static_cast<size_t>(target));
  std::vector<uint32_t> merged;
  std::vector<uint64_t> fresh;  // pairs created by this merge (they contain the new id)
  while (static_cast<int64_t>(merges.size()) < target) {
    if (heap.empty())
      return failed_precondition(
                 "the training text has no adjacent pairs left after {} merges: vocab_size {} needs {} merges",
                 merges.size(), vocab_size, target)
          .with_hint(
              fmt::format("use a vocabulary size of {} or less, or train on more text", kFirstMergeId + merges.size()));
    const HeapEntry top = heap.top();
    heap.pop();
    const auto it = pair_count.find(top.key);
    const int64_t current = it == pair_count.end() ? 0 : it->second;
    if (current != top.count) {  // stale entry: counts only fall after a pair's creation step
      if (current > 0) heap.push({current, top.key});
      continue;
    }
    if (current <= 0) continue;
    const uint32_t left = static_cast<uint32_t>(top.key >> 32), right = static_cast<uint32_t>(top.key);
    const uint32_t id = kFirstMergeId + static_cast<uint32_t>(merges.size());
    merges.push_back({left, right});

    std::vector<uint32_t> affected = std::move(where[top.key]);
    where.erase(top.key);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    fresh.clear();
    for (uint32_t w : affected) {
      std::vector<uint32_t>& sym = words[w];
      merged.clear();
      for (size_t i = 0; i < sym.size();) {
        if (i + 1 < sym.size() && sym[i] == left && sym[i + 1] == right) {
          merged.push_back(id);
          i += 2;
        } else {
          merged.push_back(sym[i++]);
        }
      }
      if (merged.size() == sym.size()) continue;  // listed but no longer contains the pair
      // Recount this piece's pairs: subtract the old ones, add the new ones.
      for (size_t i = 0; i + 1 < sym.size(); ++i) pair_count[pair_key(sym[i], sym[i + 1])] -= weight[w];
      for (size_t i = 0; i + 1 < merged.size(); ++i) {
        const uint64_t k = pair_key(merged[i], merged[i + 1]);
        pair_count[k] += weight[w];
        if (merged[i] == id || merged[i + 1] == id) {
          where[k].push_back(w);
          fresh.push_back(k);
        }
      }
      sym.swap(merged);
    }
    std::sort(fresh.begin(), fresh.end());
    fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
    for (uint64_t k : fresh) heap.push({pair_count[k], k});
  }
  if (stats) {
    stats->pieces = pieces_;
    stats->unique_pieces = static_cast<int64_t>(sorted.size());
    stats->merges = static_cast<int64_t>(merges.size());
  }
  return Tokenizer::from_merges(std::move(merges));
}

}  // namespace sp::data
