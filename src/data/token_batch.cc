#include "data/token_batch.h"

#include <cstring>

#include "core/file_io.h"

namespace sp::data {
namespace {
constexpr char kMagic[8] = {'S', 'P', 'T', 'O', 'K', 'B', 'A', 'T'};
constexpr size_t kHeader = 24;
uint32_t u32_at(const std::string& b, size_t off) {
  uint32_t v;
  std::memcpy(&v, b.data() + off, 4);
  return v;
}
}  // namespace

Result<TokenBatch> read_token_batch(const std::string& path, int64_t vocab) {
  SP_ASSIGN_OR_RETURN(std::string b, read_file(path, uint64_t{1} << 32));
  if (b.size() < kHeader)
    return corrupt("token batch '{}' is {} bytes, shorter than its 24-byte header", path, b.size());
  if (std::memcmp(b.data(), kMagic, 8) != 0)
    return corrupt("token batch '{}' does not start with the magic \"SPTOKBAT\"", path)
        .with_hint("see docs/formats/token_batch.md");
  if (u32_at(b, 8) != 1) return corrupt("token batch '{}' has version {}, expected 1", path, u32_at(b, 8));
  TokenBatch t;
  t.rows = u32_at(b, 12);
  t.cols = u32_at(b, 16);
  if (t.rows < 1 || t.cols < 2)
    return corrupt("token batch '{}' has {} rows of {} tokens; need ≥ 1 row of ≥ 2 tokens", path, t.rows, t.cols);
  // rows, cols < 2^32, so rows · cols < 2^64 fits; · 4 bytes and + 24 may not: each step is checked.
  const uint64_t ids = static_cast<uint64_t>(t.rows) * static_cast<uint64_t>(t.cols);
  uint64_t want = 0;
  if (__builtin_mul_overflow(ids, uint64_t{4}, &want) || __builtin_add_overflow(want, uint64_t{kHeader}, &want))
    return corrupt(
        "token batch '{}': its header ({} × {} tokens of 4 bytes) describes more than 2^64 bytes; the file "
        "is {} bytes",
        path, t.rows, t.cols, b.size());
  if (b.size() != want)
    return corrupt("token batch '{}' is {} bytes; its header ({} × {}) implies exactly {}", path, b.size(), t.rows,
                   t.cols, want);
  t.tokens.resize(static_cast<size_t>(t.rows * t.cols));
  std::memcpy(t.tokens.data(), b.data() + kHeader, t.tokens.size() * 4);
  for (size_t i = 0; i < t.tokens.size(); ++i) {
    const int32_t id = t.tokens[i];
    if (id >= vocab || id < -1)
      return corrupt("token batch '{}': token {} at byte offset {} is outside [0, {}) (−1 = padding is allowed)", path,
                     id, kHeader + 4 * i, vocab);
  }
  return t;
}

int64_t token_batch_targets(const TokenBatch& t) {
  int64_t n = 0;
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 1; c < t.cols; ++c) n += t.tokens[static_cast<size_t>(r * t.cols + c)] >= 0 ? 1 : 0;
  return n;
}

std::string encode_token_batch(const TokenBatch& t) {
  std::string b(kHeader + 4 * t.tokens.size(), '\0');
  std::memcpy(b.data(), kMagic, 8);
  const uint32_t h[4] = {1, static_cast<uint32_t>(t.rows), static_cast<uint32_t>(t.cols), 0};
  std::memcpy(b.data() + 8, h, 16);
  std::memcpy(b.data() + kHeader, t.tokens.data(), 4 * t.tokens.size());
  return b;
}

}  // namespace sp::data
