#include "evidence/tensor_summary.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace sp::evidence {
namespace {
inline uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}
constexpr uint64_t kLaneSeed[2] = {0x9e3779b97f4a7c15ULL, 0xd6e8feb86659fd93ULL};
}  // namespace

uint64_t summary_mix(uint64_t j, uint32_t bits, uint64_t lane) {
  return fmix64((j * 0x100000001b3ULL + kLaneSeed[lane]) ^ (static_cast<uint64_t>(bits) << 17) ^ bits);
}

void TensorSummary::add_contiguous(const float* x, int64_t n, int64_t first) {
  uint64_t a = 0, b = 0;
  for (int64_t k = 0; k < n; ++k) {
    uint32_t bits;
    std::memcpy(&bits, x + k, 4);
    const auto j = static_cast<uint64_t>(first + k);
    a += summary_mix(j, bits, 0);
    b += summary_mix(j, bits, 1);
  }
  lane0 += a;
  lane1 += b;
  stats.add(x, static_cast<size_t>(n));
}

void TensorSummary::add_shard(const float* x, const model::TensorSlot& slot, int64_t k0, int64_t k1) {
  if (k0 >= k1) return;
  if (slot.slice.dim != 1) {
    add_contiguous(x, k1 - k0, slot.logical_index(k0));
    return;
  }
  // Column shard: local rows of width w are contiguous runs of the logical row.
  const int64_t w = slot.local_shape[1];
  for (int64_t k = k0; k < k1;) {
    const int64_t row_end = std::min(k1, (k / w + 1) * w);
    add_contiguous(x + (k - k0), row_end - k, slot.logical_index(k));
    k = row_end;
  }
}

void TensorSummary::merge(const TensorSummary& o) {
  lane0 += o.lane0;
  lane1 += o.lane1;
  stats.merge(o.stats);
}

nlohmann::json TensorSummary::to_json() const {
  return {{"digest", digest().hex()},     {"l2", stats.l2_norm()},   {"sum", stats.sum()},
          {"absmax", stats.absmax()},     {"finite", stats.finite()}, {"count", stats.count()},
          {"nonfinite", stats.nonfinite_count()}};
}

void TensorSummary::to_sum_words(std::span<uint64_t> out) const {
  SP_CHECK_EQ(out.size(), kSumWords, "TensorSummary transport size");
  const std::vector<uint64_t> w = stats.to_words();  // [sum bins | sq lo | sq hi | count nan inf absmax]
  constexpr size_t B = ExactSum::kBins;
  out[0] = lane0;
  out[1] = lane1;
  for (size_t b = 0; b < B; ++b) {
    out[2 + b] = w[b];  // signed sums: two's complement addition is exact mod 2^64 and they never overflow
    const uint64_t lo = w[B + b], hi = w[2 * B + b];
    out[2 + B + 4 * b + 0] = lo & 0xffffffffULL;
    out[2 + B + 4 * b + 1] = lo >> 32;
    out[2 + B + 4 * b + 2] = hi & 0xffffffffULL;
    out[2 + B + 4 * b + 3] = hi >> 32;
  }
  out[2 + 5 * B + 0] = w[3 * B + 0];
  out[2 + 5 * B + 1] = w[3 * B + 1];
  out[2 + 5 * B + 2] = w[3 * B + 2];
}

uint64_t TensorSummary::max_word() const { return std::bit_cast<uint32_t>(stats.absmax()); }

TensorSummary TensorSummary::from_words(std::span<const uint64_t> in, uint64_t max_word) {
  SP_CHECK_EQ(in.size(), kSumWords, "TensorSummary transport size");
  constexpr size_t B = ExactSum::kBins;
  std::vector<uint64_t> w(ExactSum::kWords, 0);
  for (size_t b = 0; b < B; ++b) {
    w[b] = in[2 + b];
    // Renormalize the limbs: each is a sum of 32-bit values over ranks, so carry upward.
    unsigned __int128 acc = 0;
    acc += static_cast<unsigned __int128>(in[2 + B + 4 * b + 0]);
    acc += static_cast<unsigned __int128>(in[2 + B + 4 * b + 1]) << 32;
    acc += static_cast<unsigned __int128>(in[2 + B + 4 * b + 2]) << 64;
    acc += static_cast<unsigned __int128>(in[2 + B + 4 * b + 3]) << 96;
    w[B + b] = static_cast<uint64_t>(acc);
    w[2 * B + b] = static_cast<uint64_t>(acc >> 64);
  }
  w[3 * B + 0] = in[2 + 5 * B + 0];
  w[3 * B + 1] = in[2 + 5 * B + 1];
  w[3 * B + 2] = in[2 + 5 * B + 2];
  w[3 * B + 3] = max_word;
  TensorSummary s;
  s.lane0 = in[0];
  s.lane1 = in[1];
  s.stats = ExactSum::from_words(w);
  return s;
}

}  // namespace sp::evidence
