#include "core/hash.h"

#include <cstdio>
#include <vector>

#include <openssl/evp.h>
#include <xxhash.h>

#include "core/check.h"

namespace sp {

std::string Digest128::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

Result<Digest128> Digest128::from_hex(std::string_view hex) {
  if (hex.size() != 32) return corrupt("digest '{}' has {} hex digits, expected 32", hex, hex.size());
  Digest128 d;
  for (size_t i = 0; i < 32; ++i) {
    const char c = hex[i];
    uint64_t v;
    if (c >= '0' && c <= '9') v = static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f') v = static_cast<uint64_t>(c - 'a' + 10);
    else return corrupt("digest '{}' has a non-hex character at position {}", hex, i);
    uint64_t& word = i < 16 ? d.hi : d.lo;
    word = (word << 4) | v;
  }
  return d;
}

Digest128 xxh3_128(const void* data, size_t bytes, uint64_t seed) {
  const XXH128_hash_t h = XXH3_128bits_withSeed(data, bytes, seed);
  return {h.high64, h.low64};
}

uint64_t xxh3_64(const void* data, size_t bytes, uint64_t seed) { return XXH3_64bits_withSeed(data, bytes, seed); }

struct Sha256::Impl {
  EVP_MD_CTX* ctx = nullptr;
};

Sha256::Sha256() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  SP_CHECK(impl_->ctx != nullptr && EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) == 1,
           "OpenSSL SHA-256 initialization failed");
}

Sha256::~Sha256() { EVP_MD_CTX_free(impl_->ctx); }

void Sha256::update(const void* data, size_t bytes) {
  SP_CHECK(EVP_DigestUpdate(impl_->ctx, data, bytes) == 1, "OpenSSL SHA-256 update failed");
}

std::string Sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  SP_CHECK(EVP_DigestFinal_ex(impl_->ctx, md, &len) == 1, "OpenSSL SHA-256 final failed");
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) out += fmt::format("{:02x}", md[i]);
  return out;
}

std::string sha256_hex(const void* data, size_t bytes) {
  Sha256 h;
  h.update(data, bytes);
  return h.hex_digest();
}

Result<std::string> sha256_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return not_found("cannot open '{}' to hash it", path);
  Sha256 h;
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) h.update(buf.data(), n);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return io_error("read error while hashing '{}'", path);
  return h.hex_digest();
}

}  // namespace sp
