#include "core/hash.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
// Inlined so that XXH3 is compiled for this target (AVX2 under -march=native) rather than the
// distribution library's baseline x86-64 build: the same digests, about twice as fast.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/check.h"
#include "core/threads.h"

namespace sp {

std::string Digest128::hex() const { return fmt::format("{:016x}{:016x}", hi, lo); }

Result<Digest128> Digest128::from_hex(std::string_view hex) {
  if (hex.size() != 32) return corrupt("digest '{}' has {} hex digits, expected 32", hex, hex.size());
  Digest128 d;
  for (size_t i = 0; i < 32; ++i) {
    const char c = hex[i];
    uint64_t v;
    if (c >= '0' && c <= '9')
      v = static_cast<uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      v = static_cast<uint64_t>(c - 'a' + 10);
    else
      return corrupt("digest '{}' has a non-hex character at position {}", hex, i);
    uint64_t& word = i < 16 ? d.hi : d.lo;
    word = (word << 4) | v;
  }
  return d;
}

Digest128 xxh3_128(const void* data, size_t bytes, uint64_t seed) {
  const XXH128_hash_t h = XXH3_128bits_withSeed(data, bytes, seed);
  return {h.high64, h.low64};
}

struct Xxh3Stream::Impl {
  XXH3_state_t state;
};
Xxh3Stream::Xxh3Stream() : impl_(std::make_unique<Impl>()) { XXH3_128bits_reset(&impl_->state); }
Xxh3Stream::~Xxh3Stream() = default;
void Xxh3Stream::update(const void* data, size_t bytes) { XXH3_128bits_update(&impl_->state, data, bytes); }
Digest128 Xxh3Stream::digest() const {
  const XXH128_hash_t h = XXH3_128bits_digest(&impl_->state);
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

namespace {

// Reads until `n` bytes or end of file; returns the count, errno in `err` (0 if none).
size_t read_full(int fd, char* buf, size_t n, int& err) {
  size_t got = 0;
  err = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) err = errno;
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

// Hashes the file in kChunk pieces. Files larger than one chunk are read on a second thread while
// this one hashes the previous chunk (a ring of kSlots buffers, hashed strictly in file order), so a
// cold checkpoint shard costs max(read, hash) instead of their sum.
Result<std::string> sha256_fd(int fd, const std::string& path) {
  constexpr size_t kChunk = size_t{4} << 20, kSlots = 3;
  struct stat st {};
  Sha256 h;
  int err = 0;
  if (::fstat(fd, &st) == 0 && st.st_size <= static_cast<off_t>(kChunk)) {
    std::vector<char> buf(static_cast<size_t>(st.st_size) + 1);  // + 1: notices a file that grew
    for (size_t n; (n = read_full(fd, buf.data(), buf.size(), err)) > 0 && err == 0;) h.update(buf.data(), n);
  } else {
    std::array<std::vector<char>, kSlots> bufs;
    std::array<size_t, kSlots> len{};
    for (auto& b : bufs) b.resize(kChunk);
    std::mutex mu;
    std::condition_variable cv;
    size_t produced = 0, consumed = 0;
    bool eof = false;
    std::thread reader([&] {
      for (;;) {
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return produced - consumed < kSlots; });
        }
        int e = 0;
        const size_t n = read_full(fd, bufs[produced % kSlots].data(), kChunk, e);
        std::lock_guard lock(mu);
        if (n > 0 && e == 0) len[produced++ % kSlots] = n;
        err = e;
        eof = n < kChunk || e != 0;
        cv.notify_all();
        if (eof) return;
      }
    });
    for (;;) {
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return consumed < produced || eof; });
      if (consumed == produced) break;  // the reader is done and every chunk is hashed
      const size_t slot = consumed % kSlots;
      lock.unlock();
      h.update(bufs[slot].data(), len[slot]);
      lock.lock();
      ++consumed;
      cv.notify_all();
    }
    reader.join();
  }
  if (err != 0) return io_error("read error while hashing '{}': {}", path, std::strerror(err));
  return h.hex_digest();
}

Result<int> open_to_hash(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) return fd;
  if (errno == ENOENT) return not_found("cannot open '{}' to hash it: it does not exist", path);
  return io_error("cannot open '{}' to hash it: {}", path, std::strerror(errno));
}

}  // namespace

StreamDigests sha256_stream(std::span<const ByteSpan> pieces, uint64_t chunk_bytes, int threads) {
  SP_CHECK(chunk_bytes > 0, "chunk size must be positive");
  std::vector<uint64_t> start(pieces.size() + 1, 0);  // piece p is bytes [start[p], start[p + 1])
  for (size_t p = 0; p < pieces.size(); ++p) start[p + 1] = start[p] + pieces[p].bytes;
  const uint64_t total = start.back();
  auto hash_range = [&](uint64_t begin, uint64_t end) {
    Sha256 h;
    size_t p = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), begin) - start.begin()) - 1;
    for (uint64_t pos = begin; pos < end; ++p) {
      const uint64_t take = std::min(end, start[p + 1]) - pos;
      h.update(static_cast<const char*>(pieces[p].data) + (pos - start[p]), take);
      pos += take;
    }
    return h.hex_digest();
  };
  StreamDigests out;
  out.chunks.resize(chunk_count(total, chunk_bytes));
  // One item is the whole stream, the others one chunk each: with two threads or more the whole
  // stream (item 0, taken first) is hashed while the others take the chunks.
  run_indexed(out.chunks.size() + 1, threads, [&](size_t i) {
    if (i == 0)
      out.sha256 = hash_range(0, total);
    else
      out.chunks[i - 1] = hash_range((i - 1) * chunk_bytes, std::min(total, i * chunk_bytes));
  });
  return out;
}

Result<std::vector<std::string>> sha256_file_chunks(const std::string& path, uint64_t chunk_bytes, int threads) {
  SP_CHECK(chunk_bytes > 0, "chunk size must be positive");
  SP_ASSIGN_OR_RETURN(const int fd, open_to_hash(path));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return io_error("cannot stat '{}' to hash it: {}", path, std::strerror(e));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::vector<std::string> out(chunk_count(size, chunk_bytes));
  std::atomic<int> err{0};  // errno of the first failed read; -1: the file shrank
  run_indexed(out.size(), threads, [&](size_t c) {
    if (err.load() != 0) return;
    std::vector<char> buf(std::min<uint64_t>(chunk_bytes, uint64_t{256} << 10));  // stays in L2 while hashed
    Sha256 h;
    for (uint64_t pos = c * chunk_bytes, end = std::min(size, pos + chunk_bytes); pos < end;) {
      const ssize_t r = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), end - pos), static_cast<off_t>(pos));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        int expected = 0;
        err.compare_exchange_strong(expected, r < 0 ? errno : -1);
        break;
      }
      h.update(buf.data(), static_cast<size_t>(r));
      pos += static_cast<uint64_t>(r);
    }
    out[c] = h.hex_digest();
  });
  ::close(fd);
  if (err.load() == -1) return io_error("'{}' became shorter while it was hashed", path);
  if (err.load() != 0) return io_error("read error while hashing '{}': {}", path, std::strerror(err.load()));
  return out;
}

Result<std::string> sha256_file(const std::string& path) {
  SP_ASSIGN_OR_RETURN(const int fd, open_to_hash(path));
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  auto digest = sha256_fd(fd, path);
  ::close(fd);
  return digest;
}

}  // namespace sp
