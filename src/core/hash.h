// Hashing helpers. XXH3-128 digests payloads (trace records, token batches); SHA-256 (OpenSSL)
// identifies files (checkpoint shards, token shards, tokenizer, corpus) in manifests and contracts.
// Logical-tensor digests that must not depend on sharding live in evidence/tensor_summary.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sp {

struct Digest128 {
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const Digest128&) const = default;
  std::string hex() const;  // 32 lowercase hex digits, high word first
  static Result<Digest128> from_hex(std::string_view hex);
};

Digest128 xxh3_128(const void* data, size_t bytes, uint64_t seed = 0);
// Incremental XXH3-128: the digest of the concatenated updates equals xxh3_128 of the whole (seed 0).
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void update(const void* data, size_t bytes);
  Digest128 digest() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
uint64_t xxh3_64(const void* data, size_t bytes, uint64_t seed = 0);
inline uint64_t xxh3_64(std::string_view s, uint64_t seed = 0) { return xxh3_64(s.data(), s.size(), seed); }

// Incremental SHA-256.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t bytes);
  std::string hex_digest();  // finalizes; the object must not be updated afterwards

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string sha256_hex(const void* data, size_t bytes);
inline std::string sha256_hex(std::string_view s) { return sha256_hex(s.data(), s.size()); }
// Streams the file; errors name the path.
Result<std::string> sha256_file(const std::string& path);

// Chunked SHA-256: the digests of consecutive `chunk_bytes` pieces of a byte stream (the last piece
// may be shorter; an empty stream has none). SHA-256 runs on one core; a list of chunk digests lets a
// reader verify a large file on several cores (checkpoint shards, docs/formats/checkpoint.md).
// `threads`: how many threads may hash at once (usually usable_cpus(), core/threads.h).
inline uint64_t chunk_count(uint64_t bytes, uint64_t chunk_bytes) { return (bytes + chunk_bytes - 1) / chunk_bytes; }

struct ByteSpan {
  const void* data = nullptr;
  size_t bytes = 0;
};
struct StreamDigests {
  std::string sha256;               // of the whole stream
  std::vector<std::string> chunks;  // chunk_count(total, chunk_bytes) digests
};
// Both digests of the concatenation of `pieces`, the whole-stream one on the calling thread while up
// to threads - 1 others hash the chunks (all on the caller when threads == 1).
StreamDigests sha256_stream(std::span<const ByteSpan> pieces, uint64_t chunk_bytes, int threads);
// The chunk digests of a file, chunks read and hashed by up to `threads` threads; errors name the path.
Result<std::vector<std::string>> sha256_file_chunks(const std::string& path, uint64_t chunk_bytes, int threads);

}  // namespace sp
