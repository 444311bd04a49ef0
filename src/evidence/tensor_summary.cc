#include "evidence/tensor_summary.h"

#include <algorithm>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

namespace {

// Σ_k summary_mix(first + k, bits(x_k), lane) for both lanes, mod 2^64: the scalar definition.
void mix_lanes_scalar(const float* x, int64_t n, int64_t first, uint64_t& a, uint64_t& b) {
  for (int64_t k = 0; k < n; ++k) {
    uint32_t bits;
    std::memcpy(&bits, x + k, 4);
    const auto j = static_cast<uint64_t>(first + k);
    a += summary_mix(j, bits, 0);
    b += summary_mix(j, bits, 1);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define SP_HAVE_MIX_AVX512 1
// GCC 12's avx512fintrin.h trips -W(maybe-)uninitialized on its own _mm512_undefined temporaries.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// The same sums, eight elements at a time with AVX-512DQ's 64-bit multiply. The lanes are sums mod
// 2^64, so the vector order gives the scalar result bit for bit (tests/unit/tensor_summary_test.cc).
// Each lane keeps its own running j·prime + seed (one add per lane and 8 values, no separate seed add),
// and the three-way xor (j·prime + seed) ^ (b << 17) ^ b is one vpternlogq per lane.
__attribute__((target("avx512f,avx512dq"))) void mix_lanes_avx512(const float* x, int64_t n, int64_t first, uint64_t& a,
                                                                  uint64_t& b) {
  const __m512i c1 = _mm512_set1_epi64(static_cast<long long>(0xff51afd7ed558ccdULL));
  const __m512i c2 = _mm512_set1_epi64(static_cast<long long>(0xc4ceb9fe1a85ec53ULL));
  const __m512i step = _mm512_set1_epi64(static_cast<long long>(8 * 0x100000001b3ULL));
  // jp = j · FNV prime for j = first + [0, 8), advanced by 8 · prime (mod 2^64, as the scalar product).
  const __m512i jp =
      _mm512_mullo_epi64(_mm512_add_epi64(_mm512_set1_epi64(first), _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0)),
                         _mm512_set1_epi64(static_cast<long long>(0x100000001b3ULL)));
  __m512i ja = _mm512_add_epi64(jp, _mm512_set1_epi64(static_cast<long long>(kLaneSeed[0])));
  __m512i jb = _mm512_add_epi64(jp, _mm512_set1_epi64(static_cast<long long>(kLaneSeed[1])));
  __m512i sa = _mm512_setzero_si512(), sb = _mm512_setzero_si512();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m512i bits = _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + k)));
    const __m512i shifted = _mm512_slli_epi64(bits, 17);
    __m512i ka = _mm512_ternarylogic_epi64(ja, shifted, bits, 0x96);  // 0x96: a ^ b ^ c
    __m512i kb = _mm512_ternarylogic_epi64(jb, shifted, bits, 0x96);
    // fmix64 on both lanes, interleaved
    ka = _mm512_xor_si512(ka, _mm512_srli_epi64(ka, 33));
    kb = _mm512_xor_si512(kb, _mm512_srli_epi64(kb, 33));
    ka = _mm512_mullo_epi64(ka, c1);
    kb = _mm512_mullo_epi64(kb, c1);
    ka = _mm512_xor_si512(ka, _mm512_srli_epi64(ka, 33));
    kb = _mm512_xor_si512(kb, _mm512_srli_epi64(kb, 33));
    ka = _mm512_mullo_epi64(ka, c2);
    kb = _mm512_mullo_epi64(kb, c2);
    sa = _mm512_add_epi64(sa, _mm512_xor_si512(ka, _mm512_srli_epi64(ka, 33)));
    sb = _mm512_add_epi64(sb, _mm512_xor_si512(kb, _mm512_srli_epi64(kb, 33)));
    ja = _mm512_add_epi64(ja, step);
    jb = _mm512_add_epi64(jb, step);
  }
  // Horizontal sums in unsigned arithmetic (_mm512_reduce_add_epi64 adds as signed long long: UB on wrap).
  alignas(64) uint64_t la[8], lb[8];
  _mm512_store_si512(la, sa);
  _mm512_store_si512(lb, sb);
  for (int i = 0; i < 8; ++i) {
    a += la[i];
    b += lb[i];
  }
  mix_lanes_scalar(x + k, n - k, first + k, a, b);
}
#pragma GCC diagnostic pop
#endif

const bool kUseAvx512 = [] {
#ifdef SP_HAVE_MIX_AVX512
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}();

}  // namespace

void mix_lanes(const float* x, int64_t n, int64_t first, uint64_t& a, uint64_t& b, bool allow_simd) {
#ifdef SP_HAVE_MIX_AVX512
  if (allow_simd && kUseAvx512) return mix_lanes_avx512(x, n, first, a, b);
#endif
  mix_lanes_scalar(x, n, first, a, b);
}

bool mix_lanes_simd_available() { return kUseAvx512; }

namespace {
// One pass over memory: the statistics and the lanes of each block of kFusedBlock values back to back,
// so the lanes read the block from L1/L2 instead of a second sweep over the tensor from DRAM. The
// results are the whole run's (exact sums and sums mod 2^64 are order-free). 4 × ExactSum's 8192-value
// window, 128 KiB: within every x86 L2 the project runs on.
constexpr int64_t kFusedBlock = 32768;

void stats_and_lanes(ExactSum& stats, const float* x, int64_t n, int64_t first, uint64_t& a, uint64_t& b) {
  for (int64_t k = 0; k < n; k += kFusedBlock) {
    const int64_t len = std::min(kFusedBlock, n - k);
    stats.add(x + k, static_cast<size_t>(len));
    mix_lanes(x + k, len, first + k, a, b);
  }
}
}  // namespace

void TensorSummary::add_contiguous(const float* x, int64_t n, int64_t first, bool digest) {
  if (digest)
    stats_and_lanes(stats, x, n, first, lane0, lane1);
  else
    stats.add(x, static_cast<size_t>(n));
}

void TensorSummary::add_shard(const float* x, const model::TensorSlot& slot, int64_t k0, int64_t k1, bool digest) {
  if (k0 >= k1) return;
  const int64_t w = slot.slice.dim == 1 ? slot.local_shape[1] : 0;
  if (digest && (w == 0 || w == slot.spec.shape[1])) {  // logically contiguous (so is a dim-1 slice of every column)
    stats_and_lanes(stats, x, k1 - k0, slot.logical_index(k0), lane0, lane1);
    return;
  }
  // The statistics are order-free: one run over the local values, whatever their logical positions.
  stats.add(x, static_cast<size_t>(k1 - k0));
  if (!digest) return;
  // Column shard: local rows of width w are contiguous runs of the logical row.
  for (int64_t k = k0; k < k1;) {
    const int64_t row_end = std::min(k1, (k / w + 1) * w);
    mix_lanes(x + (k - k0), row_end - k, slot.logical_index(k), lane0, lane1);
    k = row_end;
  }
}

void TensorSummary::add_shard(ConstBufView x, const model::TensorSlot& slot, int64_t k0, bool digest) {
  // A 16-bit block (32 KiB: ExactSum's window) is read twice (statistics, lanes) from L1/L2 right after it
  // is written.
  for_each_f32_block(x, [&](const float* v, int64_t k, int64_t n) { add_shard(v, slot, k0 + k, k0 + k + n, digest); });
}

void TensorSummary::merge(const TensorSummary& o) {
  lane0 += o.lane0;
  lane1 += o.lane1;
  stats.merge(o.stats);
}

nlohmann::json TensorSummary::to_json() const {
  return {{"digest", digest().hex()},
          {"l2", stats.l2_norm()},
          {"sum", stats.sum()},
          {"absmax", stats.absmax()},
          {"finite", stats.finite()},
          {"count", stats.count()},
          {"nonfinite", stats.nonfinite_count()}};
}

void TensorSummary::to_sum_words(std::span<uint64_t> out) const {
  SP_CHECK_EQ(out.size(), kSumWords, "TensorSummary transport size");
  // [lane0, lane1 | ExactSum words without absmax]: lanes wrap mod 2^64 as the digest does, and the
  // ExactSum limbs are < 2^32, so an integer SUM over ranks is exact for both.
  const std::vector<uint64_t> w = stats.to_words();
  out[0] = lane0;
  out[1] = lane1;
  std::copy(w.begin(), w.end() - 1, out.begin() + 2);
}

uint64_t TensorSummary::max_word() const { return std::bit_cast<uint32_t>(stats.absmax()); }

TensorSummary TensorSummary::from_words(std::span<const uint64_t> in, uint64_t max_word) {
  SP_CHECK_EQ(in.size(), kSumWords, "TensorSummary transport size");
  std::vector<uint64_t> w(in.begin() + 2, in.end());
  w.push_back(max_word);
  TensorSummary s;
  s.lane0 = in[0];
  s.lane1 = in[1];
  s.stats = ExactSum::from_words(w);
  return s;
}

}  // namespace sp::evidence
