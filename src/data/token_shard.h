// Token shard files (train-NNNNN.bin, eval-NNNNN.bin): a 64-byte little-endian header followed by
// the tokens. This header is the one place the layout is written down in code; the prose
// specification is docs/formats/tokens.md, "Token shard", and the two must agree.
// Not the manifest (token_dataset.h). Invariant: a shard that parses has exactly
// 64 + num_tokens·dtype_bytes bytes and every token < vocab_size; any other file is refused
// with an error naming the file and the byte offset of the first field that is wrong.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sp::data {

inline constexpr char kShardMagic[8] = {'S', 'P', 'T', 'O', 'K', 'E', 'N', 'S'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr uint32_t kShardHeaderBytes = 64;

// Byte offsets of the header fields (all little-endian).
struct ShardLayout {
  static constexpr size_t kMagic = 0;          // 8 bytes "SPTOKENS"
  static constexpr size_t kVersion = 8;        // u32 = 1
  static constexpr size_t kHeaderBytes = 12;   // u32 = 64
  static constexpr size_t kDtypeBytes = 16;    // u32: 2 (uint16 tokens) or 4 (uint32 tokens)
  static constexpr size_t kSplit = 20;         // u32: 0 train, 1 eval
  static constexpr size_t kVocabSize = 24;     // u64
  static constexpr size_t kNumTokens = 32;     // u64
  static constexpr size_t kNumDocuments = 40;  // u64: <|endoftext|> tokens in this shard
  static constexpr size_t kShardIndex = 48;    // u64: position in the split's shard list
  static constexpr size_t kReserved = 56;      // 8 bytes, zero
  static constexpr size_t kTokens = 64;
};
static_assert(ShardLayout::kTokens == kShardHeaderBytes);
static_assert(ShardLayout::kReserved + 8 == ShardLayout::kTokens);
static_assert(sizeof(kShardMagic) == ShardLayout::kVersion - ShardLayout::kMagic);

struct ShardHeader {
  uint32_t dtype_bytes = 2;
  uint32_t split = 0;
  uint64_t vocab_size = 0;
  uint64_t num_tokens = 0;
  uint64_t num_documents = 0;
  uint64_t shard_index = 0;
};

// 2 when every id fits 16 bits (vocab ≤ 65536), else 4.
uint32_t shard_dtype_bytes(int64_t vocab_size);

// The complete file bytes of one shard.
std::string shard_encode(const ShardHeader& header, std::span<const uint32_t> tokens);

// Parses and checks a shard's bytes (the file is named `name` in errors). When `expect` is given,
// its vocab_size, split, shard_index and dtype must match. Appends the tokens to `out`. num_documents
// counts the tokens equal to `eot_id` (the manifest's: 256, <|endoftext|>, for the engine's own BPE).
Result<ShardHeader> shard_decode(std::string_view bytes, const std::string& name, const ShardHeader* expect,
                                 std::vector<uint32_t>* out, uint32_t eot_id = 256);

}  // namespace sp::data
