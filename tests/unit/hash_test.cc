// core/hash.h: sha256_file (single-threaded for small files, a reader thread plus the hashing thread
// for larger ones) equals SHA-256 of the same bytes in memory at every size around the chunk
// boundary, and a missing file is a clear not-found error naming it.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/hash.h"

namespace sp {
namespace {

TEST(Sha256File, EqualsInMemoryDigestAcrossChunkBoundaries) {
  const std::string path = (std::filesystem::temp_directory_path() / "sp_hash_test.bin").string();
  constexpr size_t kChunk = size_t{4} << 20;  // sha256_file's chunk
  for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, kChunk - 1, kChunk, kChunk + 1, 3 * kChunk, 3 * kChunk + 7}) {
    std::string bytes(n, '\0');
    for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, n, f), n);
    std::fclose(f);
    auto got = sha256_file(path);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, sha256_hex(bytes)) << "size " << n;
  }
  std::filesystem::remove(path);
  EXPECT_EQ(sha256_hex(std::string()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256File, MissingFileNamesThePath) {
  auto got = sha256_file("/nonexistent/sp_hash_test_missing.bin");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("/nonexistent/sp_hash_test_missing.bin"), std::string::npos);
}

}  // namespace
}  // namespace sp
