// Byte-level BPE tokenizer: ids 0..255 are the raw bytes, 256 is <|endoftext|>, and merge i
// (0-based, in training order) creates id 257 + i. Not the trainer (bpe_train.h).
// Invariant: decode(encode(x)) == x for EVERY byte string x, valid UTF-8 or not: pieces from the
// pre-tokenizer cover every byte, an invalid UTF-8 byte is a piece of its own and stays a single
// byte token, and merges only ever join adjacent tokens of one piece. encode() never produces 256:
// the text "<|endoftext|>" is encoded as ordinary bytes; documents are separated by the caller.
// Format: docs/formats/tokens.md, "tokenizer.json". Reference: Sennrich et al. 2016; GPT-2 (2019).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "data/text_encoder.h"

namespace sp::data {

inline constexpr uint32_t kByteTokens = 256;
inline constexpr uint32_t kEndOfTextId = 256;
inline constexpr uint32_t kFirstMergeId = 257;  // 256 byte tokens + 1 special token
inline constexpr std::string_view kEndOfTextText = "<|endoftext|>";
inline constexpr std::string_view kTokenizerFormat = "shardproof-bpe";
inline constexpr std::string_view kPretokenizerName = "shardproof-pretok-v1";
inline constexpr int64_t kMaxVocabSize = int64_t{1} << 24;

struct Merge {
  uint32_t left = 0;
  uint32_t right = 0;
  bool operator==(const Merge&) const = default;
};

// Open-addressing map (left, right) → merge rank; what encode() probes once per adjacent pair.
class PairRanks {
 public:
  void build(const std::vector<Merge>& merges);
  // The rank of merge (left, right), or -1.
  int64_t find(uint32_t left, uint32_t right) const {
    if (slots_.empty()) return -1;
    const uint64_t key = ((static_cast<uint64_t>(left) << 32) | right) + 1;
    size_t h = static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    while (true) {
      const Slot& s = slots_[h];
      if (s.key == key) return s.rank;
      if (s.key == 0) return -1;
      h = (h + 1) & mask_;
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;  // (left << 32 | right) + 1; 0 = empty
    int64_t rank = 0;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
};

// Applies the merges to one piece of tokens. Two implementations that must agree (tests compare
// them): the naive one is GPT-2's loop (find the lowest-rank adjacent pair, merge every occurrence
// left to right, repeat; O(n²)), the heap one pops (rank, position) from a priority queue over a
// linked list (O(n log n)) and is used for long pieces.
void bpe_merge_naive(const PairRanks& ranks, std::vector<uint32_t>& tokens);
void bpe_merge_heap(const PairRanks& ranks, std::vector<uint32_t>& tokens);

class Tokenizer : public TextEncoder {
 public:
  // Reads and validates tokenizer.json; errors name the file and the offending key or merge.
  static Result<Tokenizer> load(const std::string& path);
  static Result<Tokenizer> from_json(std::string_view text, const std::string& name);
  // Validates that merge i only refers to ids below 257 + i and never to <|endoftext|>.
  static Result<Tokenizer> from_merges(std::vector<Merge> merges);

  // The canonical tokenizer.json text (one merge per line); byte-identical for equal merges.
  std::string to_json() const;

  std::vector<uint32_t> encode(std::string_view text) const;
  void encode_append(std::string_view text, std::vector<uint32_t>& out) const override;
  // Every id must be < vocab_size() (SP_CHECK: ids come from verified shards or the model).
  std::string decode(std::span<const uint32_t> ids) const;

  int64_t vocab_size() const override { return static_cast<int64_t>(bytes_.size()); }
  std::string_view kind() const override { return kTokenizerFormat; }
  uint32_t eos_id() const override { return kEndOfTextId; }
  std::string eos_token() const override { return std::string(kEndOfTextText); }
  const std::vector<Merge>& merges() const { return merges_; }
  // The bytes a token stands for ("<|endoftext|>" for the special token).
  const std::string& token_bytes(uint32_t id) const { return bytes_[id]; }

 private:
  std::vector<Merge> merges_;
  std::vector<std::string> bytes_;  // (V) bytes of every id
  PairRanks ranks_;
};

}  // namespace sp::data
