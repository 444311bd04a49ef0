// The token batch of `shardproof grads` (data/token_batch.h, docs/formats/token_batch.md) as untrusted
// input: header sizes whose byte count overflows 64 bits are refused by name before any allocation
// (rows = cols = 2^31 used to wrap to 24 bytes and abort in std::vector), lengths must match exactly,
// ids are range-checked, and a batch whose targets are all padding has no target token to average.
#include "data/token_batch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/file_io.h"
#include "unity_id.h"

namespace sp::data {
namespace {
namespace SP_TEST_ID {
namespace fs = std::filesystem;

std::string header(uint32_t rows, uint32_t cols) {
  std::string b = "SPTOKBAT";
  const uint32_t h[4] = {1, rows, cols, 0};
  b.append(reinterpret_cast<const char*>(h), sizeof(h));
  return b;
}

std::string write_tmp(const std::string& name, const std::string& bytes) {
  const std::string path =
      (fs::temp_directory_path() / ("token_batch_test_" + std::to_string(::getpid()) + name)).string();
  EXPECT_TRUE(write_file(path, bytes).ok());
  return path;
}

TEST(TokenBatch, HeaderWhoseSizeOverflowsIsRefusedByName) {
  for (const auto& [rows, cols] : {std::pair<uint32_t, uint32_t>{1u << 31, 1u << 31},
                                   {0xFFFFFFFFu, 0xFFFFFFFFu},
                                   {0xFFFFFFFFu, 4},
                                   {1u << 31, 2}}) {
    const std::string path = write_tmp("big", header(rows, cols));
    auto r = read_token_batch(path, 100);
    ASSERT_FALSE(r.ok()) << rows << " x " << cols;
    const std::string& m = r.status().message();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find(fmt::format("{} × {}", rows, cols)), std::string::npos) << m;
    // The 64-bit wrap (24 + 4·2^62 = 24) must not be printed or accepted as a length.
    EXPECT_EQ(m.find("implies exactly 24"), std::string::npos) << m;
    fs::remove(path);
  }
}

TEST(TokenBatch, ExactLengthAndIds) {
  TokenBatch t{.rows = 2, .cols = 3, .tokens = {1, 2, 3, 4, -1, 5}};
  const std::string bytes = encode_token_batch(t);
  const std::string ok = write_tmp("ok", bytes);
  auto r = read_token_batch(ok, 10);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->tokens, t.tokens);
  EXPECT_EQ(token_batch_targets(*r), 3);  // columns 1..: 2, 3, −1 (padding), 5
  EXPECT_FALSE(read_token_batch(write_tmp("short", bytes.substr(0, bytes.size() - 1)), 10).ok());
  EXPECT_FALSE(read_token_batch(write_tmp("long", bytes + "x"), 10).ok());
  auto bad = read_token_batch(ok, 5);  // id 5 ≥ vocab 5
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("token 5 at byte offset 44"), std::string::npos) << bad.status().message();
}

TEST(TokenBatch, AllPaddingHasNoTargets) {
  const TokenBatch padded{.rows = 2, .cols = 3, .tokens = {7, -1, -1, 8, -1, -1}};  // inputs, but no target
  EXPECT_EQ(token_batch_targets(padded), 0);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::data
