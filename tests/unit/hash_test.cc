// core/hash.h: sha256_file (single-threaded for small files, a reader thread plus the hashing thread
// for larger ones) equals SHA-256 of the same bytes in memory at every size around the chunk
// boundary, and a missing file is a clear not-found error naming it. Chunked digests
// (sha256_stream over pieces in memory, sha256_file_chunks over a file) equal SHA-256 of each chunk
// computed directly, for any thread count, chunk size and split of the stream into pieces.
#include "core/hash.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/threads.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp {
namespace {
namespace SP_TEST_ID {

// n pseudo-random bytes (a multiplicative hash of the index, shifted right by `shift`), written to
// `path` and returned.
std::string write_pattern(const std::string& path, size_t n, int shift) {
  std::string bytes(n, '\0');
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> shift);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (f != nullptr) {
    EXPECT_EQ(std::fwrite(bytes.data(), 1, n, f), n);
    std::fclose(f);
  }
  return bytes;
}

TEST(Sha256File, EqualsInMemoryDigestAcrossChunkBoundaries) {
  const sp::test::TempDir tmp;
  const std::string path = tmp.file("pattern.bin");
  constexpr size_t kChunk = size_t{4} << 20;  // sha256_file's chunk
  for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, kChunk - 1, kChunk, kChunk + 1, 3 * kChunk, 3 * kChunk + 7}) {
    const std::string bytes = write_pattern(path, n, 13);
    auto got = sha256_file(path);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(*got, sha256_hex(bytes)) << "size " << n;
  }
  EXPECT_EQ(sha256_hex(std::string()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256File, MissingFileNamesThePath) {
  auto got = sha256_file("/nonexistent/sp_hash_test_missing.bin");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("/nonexistent/sp_hash_test_missing.bin"), std::string::npos);
}

std::vector<std::string> chunk_digests(const std::string& bytes, size_t chunk) {
  std::vector<std::string> out;
  for (size_t at = 0; at < bytes.size(); at += chunk) out.push_back(sha256_hex(bytes.substr(at, chunk)));
  return out;
}

TEST(Sha256Chunks, StreamAndFileEqualDirectDigests) {
  const sp::test::TempDir tmp;
  const std::string path = tmp.file("pattern.bin");
  for (size_t n : {size_t{0}, size_t{1}, size_t{99}, size_t{100}, size_t{101}, size_t{1000}, size_t{12345}}) {
    const std::string bytes = write_pattern(path, n, 11);
    for (size_t chunk : {size_t{1}, size_t{100}, size_t{4096}}) {
      const std::vector<std::string> want = chunk_digests(bytes, chunk);
      ASSERT_EQ(want.size(), chunk_count(n, chunk));
      for (int threads : {1, 2, 5}) {
        // The stream cut into uneven pieces (some empty) that do not line up with the chunks.
        std::vector<ByteSpan> pieces;
        for (size_t at = 0, k = 0; at < n || k == 0; ++k) {
          const size_t len = std::min(n - at, (k * 37) % 211);
          pieces.push_back({bytes.data() + at, len});
          at += len;
          if (n == 0) break;
        }
        const StreamDigests s = sha256_stream(pieces, chunk, threads);
        EXPECT_EQ(s.sha256, sha256_hex(bytes)) << n << " " << chunk << " " << threads;
        EXPECT_EQ(s.chunks, want) << n << " " << chunk << " " << threads;
        auto file = sha256_file_chunks(path, chunk, threads);
        ASSERT_TRUE(file.ok()) << file.status().message();
        EXPECT_EQ(*file, want) << n << " " << chunk << " " << threads;
      }
    }
  }
  EXPECT_GE(usable_cpus(), 1);
  EXPECT_EQ(sha256_file_chunks("/nonexistent/sp_hash_chunks.bin", 16, 2).status().code(), StatusCode::kNotFound);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp
