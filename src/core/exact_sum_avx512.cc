// ExactSum's pass 2 of a window block (exact_sum.h, add_window_avx512 in exact_sum.cc): the fixed-point
// integers a = ±M·2^(b−base) of the values in the window summed in 64-bit lanes, sixteen values at a time.
// Two kernels, the same lane totals up to where a² is split: window_integer with AVX-512F shifts (a² as
// its low 48 bits and the rest), window_ifma with AVX512-DQ conversions and AVX512-IFMA's 52-bit
// multiply-adds (a² as its low 52 bits and the rest), half the instructions of the first.
#include <bit>
#include <cstdint>

#include "core/exact_sum.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace sp {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {
// The non-zero values below the window, one by one into their bins (rare: smaller than 2^−24 of the
// block's largest).
template <class BinOne>
__attribute__((target("avx512f"))) inline void bin_below(__m512i u, __mmask16 below, BinOne&& bin_one) {
  alignas(64) uint32_t us[16];
  _mm512_store_si512(us, u);
  for (unsigned k = 0; k < 16; ++k)
    if ((below >> k) & 1u) bin_one(us[k]);
}
// The same line of the next block into L2 while this one is summed: its pass 1 (the block's maximum) then
// reads from cache instead of waiting on memory (cold parameters and gradients: ExactSum 0.45 -> 0.31 ns per
// value on the AMD EPYC of docs/performance.md). Past the end of the run it is a no-op (prefetches do not fault).
constexpr size_t kPrefetchAhead = 8192;  // ExactSum::kWindowBlock (private; checked below)
inline void prefetch_next_block(const float* x) {
  // (an address, not a pointer into the run: past its end there is no object to point at)
  _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(x) + kPrefetchAhead * sizeof(float)),
               _MM_HINT_T1);
}
}  // namespace

__attribute__((target("avx512f"))) void ExactSum::window_integer(const float* xb, size_t len, int base,
                                                                 uint64_t (&lanes)[4][8]) {
  static_assert(kWindowBlock == kPrefetchAhead);
  const __m512i man_mask = _mm512_set1_epi32(0x7FFFFF), hidden = _mm512_set1_epi32(0x800000),
                sign = _mm512_set1_epi32(static_cast<int>(0x80000000u)), one = _mm512_set1_epi32(1),
                byte = _mm512_set1_epi32(0xFF), zero = _mm512_setzero_si512(),
                low48 = _mm512_set1_epi64((int64_t{1} << 48) - 1), s48 = _mm512_set1_epi64(48);
  const __mmask16 tail = static_cast<__mmask16>((1u << (len % 16)) - 1);
  const __m512i vbase = _mm512_set1_epi32(base);
  __m512i pos = zero, neg = zero, sq_lo = zero, sq_hi = zero;
  for (size_t i = 0; i < len; i += 16) {
    const __m512i u = i + 16 <= len ? _mm512_loadu_si512(xb + i) : _mm512_maskz_loadu_epi32(tail, xb + i);
    prefetch_next_block(xb + i);
    const __m512i e = _mm512_and_si512(_mm512_srli_epi32(u, 23), byte);
    const __m512i m = _mm512_and_si512(u, man_mask);
    __m512i mant = _mm512_mask_or_epi32(m, _mm512_test_epi32_mask(e, e), m, hidden);
    __m512i d = _mm512_sub_epi32(_mm512_max_epu32(e, one), vbase);
    const __mmask16 in_window = _mm512_cmpge_epi32_mask(d, zero);
    const __mmask16 below = static_cast<__mmask16>(~in_window & _mm512_test_epi32_mask(mant, mant));
    if (below != 0) [[unlikely]] {
      binned_ = true;
      bin_below(u, below, [this](uint32_t v) { bin_one(v); });
    }
    mant = _mm512_maskz_mov_epi32(in_window, mant);
    d = _mm512_maskz_mov_epi32(in_window, d);
    const __mmask16 negative = _mm512_test_epi32_mask(u, sign);
    for (int h = 0; h < 2; ++h) {
      const __m512i m64 =
          _mm512_cvtepu32_epi64(h == 0 ? _mm512_castsi512_si256(mant) : _mm512_extracti64x4_epi64(mant, 1));
      const __m512i d64 = _mm512_cvtepu32_epi64(h == 0 ? _mm512_castsi512_si256(d) : _mm512_extracti64x4_epi64(d, 1));
      const auto ng = static_cast<__mmask8>(h == 0 ? negative : negative >> 8);
      const __m512i a = _mm512_sllv_epi64(m64, d64);
      pos = _mm512_mask_add_epi64(pos, static_cast<__mmask8>(~ng), pos, a);
      neg = _mm512_mask_add_epi64(neg, ng, neg, a);
      const __m512i sq = _mm512_mul_epu32(m64, m64);
      const __m512i d2 = _mm512_add_epi64(d64, d64);
      sq_lo = _mm512_add_epi64(sq_lo, _mm512_and_si512(_mm512_sllv_epi64(sq, d2), low48));
      sq_hi = _mm512_add_epi64(sq_hi, _mm512_srlv_epi64(sq, _mm512_sub_epi64(s48, d2)));
    }
  }
  _mm512_store_si512(lanes[0], pos);
  _mm512_store_si512(lanes[1], neg);
  _mm512_store_si512(lanes[2], sq_lo);
  _mm512_store_si512(lanes[3], sq_hi);
}

// For base ≥ 2 (no subnormal in the window: every value in it is normal) the double x·2^(150−base) is
// exactly ±a, a < 2^48 an integer, so its conversion to uint64 is exact; IFMA then adds the low and the
// high 52 bits of the exact 96-bit product a·a. The window test is |x|'s bit pattern ≥ base·2^23 (bin ≥ base).
__attribute__((target("avx512f,avx512dq,avx512ifma"))) void ExactSum::window_ifma(const float* xb, size_t len, int base,
                                                                                  uint64_t (&lanes)[4][8]) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), sign = _mm512_set1_epi32(static_cast<int>(0x80000000u)),
                zero = _mm512_setzero_si512(), threshold = _mm512_set1_epi32(base << 23);
  const __m512d scale = _mm512_set1_pd(std::bit_cast<double>(static_cast<uint64_t>(1023 + 150 - base) << 52));
  const __mmask16 tail = static_cast<__mmask16>((1u << (len % 16)) - 1);
  __m512i pos = zero, neg = zero, sq_lo = zero, sq_hi = zero;
  for (size_t i = 0; i < len; i += 16) {
    const __m512i u = i + 16 <= len ? _mm512_loadu_si512(xb + i) : _mm512_maskz_loadu_epi32(tail, xb + i);
    prefetch_next_block(xb + i);
    const __m512i mag = _mm512_and_si512(u, abs_mask);
    const __mmask16 in_window = _mm512_cmpge_epu32_mask(mag, threshold);
    const __mmask16 below = static_cast<__mmask16>(~in_window & _mm512_test_epi32_mask(mag, mag));
    if (below != 0) [[unlikely]] {
      binned_ = true;
      bin_below(u, below, [this](uint32_t v) { bin_one(v); });
    }
    const __m512 w = _mm512_castsi512_ps(_mm512_maskz_mov_epi32(in_window, mag));
    const __mmask16 negative = _mm512_test_epi32_mask(u, sign);
    for (int h = 0; h < 2; ++h) {
      const __m256 w8 =
          h == 0 ? _mm512_castps512_ps256(w) : _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(w), 1));
      const __m512i a = _mm512_cvttpd_epu64(_mm512_mul_pd(_mm512_cvtps_pd(w8), scale));
      const auto ng = static_cast<__mmask8>(h == 0 ? negative : negative >> 8);
      pos = _mm512_mask_add_epi64(pos, static_cast<__mmask8>(~ng), pos, a);
      neg = _mm512_mask_add_epi64(neg, ng, neg, a);
      sq_lo = _mm512_madd52lo_epu64(sq_lo, a, a);
      sq_hi = _mm512_madd52hi_epu64(sq_hi, a, a);
    }
  }
  _mm512_store_si512(lanes[0], pos);
  _mm512_store_si512(lanes[1], neg);
  _mm512_store_si512(lanes[2], sq_lo);
  _mm512_store_si512(lanes[3], sq_hi);
}

#pragma GCC diagnostic pop

}  // namespace sp
#endif
