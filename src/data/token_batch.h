// The token batch file of `shardproof grads --tokens T.bin` (docs/formats/token_batch.md):
//   offset 0  8 bytes  magic "SPTOKBAT"
//          8  u32      version = 1
//         12  u32      rows B
//         16  u32      cols = T + 1 (inputs are [:, :T], targets [:, 1:])
//         20  u32      reserved = 0
//         24  i32      B·(T+1) token ids, row-major, little-endian; −1 is padding: as an input its
//                      embedding is zero, as a target it is ignored (not counted in the mean)
// The file length must be exactly 24 + 4·B·(T+1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace sp::data {

struct TokenBatch {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<int32_t> tokens;  // (rows, cols)
};

// Validates the header (rows · cols computed without overflow, checked against the file's real size
// before anything is allocated), the exact length and every id (in [0, vocab) or −1).
Result<TokenBatch> read_token_batch(const std::string& path, int64_t vocab_size);
// Target tokens (columns 1.., not −1): the denominator of the batch's mean loss.
int64_t token_batch_targets(const TokenBatch& batch);
std::string encode_token_batch(const TokenBatch& batch);

}  // namespace sp::data
