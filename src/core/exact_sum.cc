#include "core/exact_sum.h"

#include <algorithm>
#include <bit>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/check.h"

namespace sp {

// One finite value into its bin (no count, no absmax; the caller sets binned_). Subnormals
// (exponent field 0) share bin 1 with mantissa M = m, no hidden bit.
inline void ExactSum::bin_one(uint32_t u) {
  const uint32_t e = (u >> 23) & 0xFFu;
  const uint32_t m = u & 0x7FFFFFu;
  const uint32_t b = e == 0 ? 1u : e;
  const int64_t mant = static_cast<int64_t>(e == 0 ? m : (m | 0x800000u));
  sum_[b] += (u >> 31) ? -mant : mant;
  const auto sq = static_cast<uint64_t>(mant * mant);
  const uint64_t lo = sq_lo_[b] + sq;
  sq_hi_[b] += (lo < sq) ? 1 : 0;
  sq_lo_[b] = lo;
}

// Short runs (column-shard rows, small tensors): straight into the bins, since zeroing and folding
// add()'s four histograms would cost more than the run itself. Same decoding as add().
void ExactSum::add_short(const float* x, size_t n) {
  binned_ = true;
  uint32_t maxbits = std::bit_cast<uint32_t>(absmax_);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(x[i]);
    const uint32_t e = (u >> 23) & 0xFFu;
    const uint32_t m = u & 0x7FFFFFu;
    if (e == 0xFFu) {
      if (m != 0)
        ++nan_;
      else
        ++inf_;
      continue;
    }
    bin_one(u);
    maxbits = std::max(maxbits, u & 0x7FFFFFFFu);
  }
  count_ += n;
  absmax_ = std::bit_cast<float>(maxbits);
}

void ExactSum::add_histogram(const float* x, size_t n) {
  if (n < 4096) return add_short(x, n);
  binned_ = true;
  // Loop check: each value lands in exactly one bin; subnormals (exponent field 0) share bin 1
  // with mantissa M = m (no hidden bit), which keeps value = M·2^(b−150) exact for them too.
  // Speed: neighbouring values mostly share an exponent, so one histogram would chain every add
  // through the same memory word. kWays histograms (element i goes to way i % kWays) keep kWays
  // chains in flight; a block of at most kBlock values is folded into the bins (integer adds, so
  // still exact and order-free) before the ways' 64-bit square sums could overflow:
  // kBlock / kWays adds of M² < 2^48 stay below 2^64.
  constexpr size_t kWays = 4, kBlock = size_t{1} << 16;
  std::array<std::array<int64_t, kBins>, kWays> ws;
  std::array<std::array<uint64_t, kBins>, kWays> wq;
  uint32_t maxbits = std::bit_cast<uint32_t>(absmax_);
  for (size_t b0 = 0; b0 < n; b0 += kBlock) {
    const size_t b1 = std::min(n, b0 + kBlock);
    for (auto& w : ws) w.fill(0);
    for (auto& w : wq) w.fill(0);
    uint32_t mx[kWays] = {maxbits, maxbits, maxbits, maxbits};
    size_t i = b0;
    auto one = [&](size_t way, uint32_t u) {
      const uint32_t e = (u >> 23) & 0xFFu;
      const uint32_t m = u & 0x7FFFFFu;
      if (e == 0xFFu) {
        if (m != 0)
          ++nan_;
        else
          ++inf_;
        return;
      }
      const uint32_t b = e == 0 ? 1u : e;
      const int64_t mant = static_cast<int64_t>(e == 0 ? m : (m | 0x800000u));
      ws[way][b] += (u >> 31) ? -mant : mant;
      wq[way][b] += static_cast<uint64_t>(mant * mant);
      mx[way] = std::max(mx[way], u & 0x7FFFFFFFu);
    };
    for (; i + kWays <= b1; i += kWays)
      for (size_t w = 0; w < kWays; ++w) one(w, std::bit_cast<uint32_t>(x[i + w]));
    for (; i < b1; ++i) one(0, std::bit_cast<uint32_t>(x[i]));
    for (size_t w = 0; w < kWays; ++w) {
      maxbits = std::max(maxbits, mx[w]);
      for (int b = 0; b < kBins; ++b) {
        sum_[b] += ws[w][b];
        const uint64_t lo = sq_lo_[b] + wq[w][b];
        sq_hi_[b] += (lo < wq[w][b]) ? 1 : 0;
        sq_lo_[b] = lo;
      }
    }
  }
  count_ += n;
  absmax_ = std::bit_cast<float>(maxbits);
}

namespace {

constexpr uint64_t kLimbMask = 0xffffffffULL;

// limbs += v · 2^shift, v < 2^128, limbs of 32 bits (the words may exceed 2^32 until normalized).
template <size_t K>
void add_shifted(std::array<uint64_t, K>& limbs, unsigned __int128 v, int shift) {
  if (v == 0) return;
  const int q = shift / 32, r = shift % 32;
  const unsigned __int128 lo = v << r;
  const uint64_t hi = r == 0 ? 0 : static_cast<uint64_t>(v >> (128 - r));
  for (int i = 0; i < 5; ++i) {
    const uint64_t chunk = i < 4 ? static_cast<uint64_t>(lo >> (32 * i)) & kLimbMask : hi;
    if (chunk == 0) continue;
    SP_CHECK(static_cast<size_t>(q + i) < K, "ExactSum: fixed-point limb {} out of range", q + i);
    limbs[static_cast<size_t>(q + i)] += chunk;
  }
}

// Carries so that every word is < 2^32; the value must fit (the limb counts are sized for it).
template <size_t K>
void normalize(std::array<uint64_t, K>& limbs) {
  uint64_t carry = 0;
  for (size_t k = 0; k < K; ++k) {
    const unsigned __int128 w = static_cast<unsigned __int128>(limbs[k]) + carry;
    limbs[k] = static_cast<uint64_t>(w) & kLimbMask;
    carry = static_cast<uint64_t>(w >> 32);
  }
  SP_CHECK_EQ(carry, uint64_t{0}, "ExactSum: fixed-point overflow");
}

template <size_t K>
int compare(const std::array<uint64_t, K>& a, const std::array<uint64_t, K>& b) {
  for (size_t k = K; k-- > 0;)
    if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
  return 0;
}

// a − b for normalized a ≥ b.
template <size_t K>
std::array<uint64_t, K> subtract(const std::array<uint64_t, K>& a, const std::array<uint64_t, K>& b) {
  std::array<uint64_t, K> d{};
  int64_t borrow = 0;
  for (size_t k = 0; k < K; ++k) {
    int64_t v = static_cast<int64_t>(a[k]) - static_cast<int64_t>(b[k]) - borrow;
    borrow = v < 0 ? 1 : 0;
    d[k] = static_cast<uint64_t>(v + (borrow << 32));
  }
  return d;
}

int bit_length(unsigned __int128 w) {
  const auto hi = static_cast<uint64_t>(w >> 64), lo = static_cast<uint64_t>(w);
  return hi != 0 ? 128 - std::countl_zero(hi) : 64 - std::countl_zero(lo);
}

// The normalized fixed-point value Σ limbs[k]·2^(32k + unit_exp), correctly rounded to double
// (nearest, ties to even).
template <size_t K>
double to_double(const std::array<uint64_t, K>& limbs, int unit_exp) {
  int top = static_cast<int>(K) - 1;
  while (top >= 0 && limbs[static_cast<size_t>(top)] == 0) --top;
  if (top < 0) return 0.0;
  const int low = std::max(0, top - 2);  // a window of up to three limbs holds ≥ 65 significant bits
  unsigned __int128 w = 0;
  for (int k = top; k >= low; --k) w = (w << 32) | limbs[static_cast<size_t>(k)];
  bool sticky = false;
  for (int k = 0; k < low; ++k) sticky |= limbs[static_cast<size_t>(k)] != 0;
  int e = 32 * low;
  const int nbits = bit_length(w);
  if (nbits > 64) {
    const int drop = nbits - 64;
    sticky |= (w & ((static_cast<unsigned __int128>(1) << drop) - 1)) != 0;
    w >>= drop;
    e += drop;
  }
  auto m = static_cast<uint64_t>(w);
  const int mb = 64 - std::countl_zero(m);
  if (mb > 53) {
    const int sh = mb - 53;
    const uint64_t rest = m & ((uint64_t{1} << sh) - 1), half = uint64_t{1} << (sh - 1);
    m >>= sh;
    e += sh;
    if (rest > half || (rest == half && (sticky || (m & 1) != 0))) {
      ++m;
      if (m == (uint64_t{1} << 53)) {
        m >>= 1;
        ++e;
      }
    }
  }
  return std::ldexp(static_cast<double>(m), e + unit_exp);
}

}  // namespace

#if defined(__x86_64__) && defined(__GNUC__)
#define SP_HAVE_EXACT_SUM_AVX512 1
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// The same exact sums without a histogram, sixteen values at a time. Per block of kBlock values:
// pass 1 finds the largest exponent field E (a block holding an Inf or NaN goes to the histogram);
// pass 2 writes every value with bin b ≥ B = max(E − kWindow, 1) as a fixed-point integer in units
// of 2^(B−150): a = M·2^(b−B) < 2^(24+kWindow) = 2^48, and its square M²·2^(2(b−B)) < 2^96 as
// lo = low 48 bits and hi = the rest (< 2^48). Σa of positive and of negative values, Σlo and Σhi
// go to 64-bit lanes: each lane takes kBlock/8 = 2^10 terms < 2^48, far from 2^64. The block's four
// lane totals are then added into the fixed-point limbs (the same units settled() uses for bins).
// A non-zero value below the window (bin < B: smaller than 2^−24 of the block's largest, rare in
// weights and gradients) goes to its bin instead. All integer arithmetic: the result is the exact
// sum, so it equals the histogram's bit for bit after settling (tests/unit/exact_sum_test.cc).
__attribute__((target("avx512f"))) void ExactSum::add_window_avx512(const float* x, size_t n) {
  constexpr size_t kBlock = 8192;
  constexpr int kWindow = 24;
  const __m512i exp_mask = _mm512_set1_epi32(0x7F800000), man_mask = _mm512_set1_epi32(0x7FFFFF),
                hidden = _mm512_set1_epi32(0x800000), abs_mask = _mm512_set1_epi32(0x7FFFFFFF),
                sign = _mm512_set1_epi32(static_cast<int>(0x80000000u)), one = _mm512_set1_epi32(1),
                byte = _mm512_set1_epi32(0xFF), zero = _mm512_setzero_si512(),
                low48 = _mm512_set1_epi64((int64_t{1} << 48) - 1), s48 = _mm512_set1_epi64(48);
  __m512i vmax = _mm512_set1_epi32(static_cast<int>(std::bit_cast<uint32_t>(absmax_)));
  for (size_t b0 = 0; b0 < n; b0 += kBlock) {
    const size_t len = std::min(kBlock, n - b0);
    const float* xb = x + b0;
    const __mmask16 tail = static_cast<__mmask16>((1u << (len % 16)) - 1);
    __m512i em = zero;
    size_t i = 0;
    for (; i + 16 <= len; i += 16) em = _mm512_max_epu32(em, _mm512_and_si512(_mm512_loadu_si512(xb + i), exp_mask));
    if (i < len) em = _mm512_max_epu32(em, _mm512_and_si512(_mm512_maskz_loadu_epi32(tail, xb + i), exp_mask));
    const uint32_t emax = _mm512_reduce_max_epu32(em) >> 23;
    if (emax == 0xFFu) {  // an Inf or NaN: count it in the histogram
      add_short(xb, len);
      continue;
    }
    const int base = std::max(static_cast<int>(emax) - kWindow, 1);
    const __m512i vbase = _mm512_set1_epi32(base);
    __m512i pos = zero, neg = zero, sq_lo = zero, sq_hi = zero;
    for (i = 0; i < len; i += 16) {
      const __m512i u = i + 16 <= len ? _mm512_loadu_si512(xb + i) : _mm512_maskz_loadu_epi32(tail, xb + i);
      const __m512i e = _mm512_and_si512(_mm512_srli_epi32(u, 23), byte);
      const __m512i m = _mm512_and_si512(u, man_mask);
      __m512i mant = _mm512_mask_or_epi32(m, _mm512_test_epi32_mask(e, e), m, hidden);
      __m512i d = _mm512_sub_epi32(_mm512_max_epu32(e, one), vbase);
      const __mmask16 in_window = _mm512_cmpge_epi32_mask(d, zero);
      const __mmask16 below = static_cast<__mmask16>(~in_window & _mm512_test_epi32_mask(mant, mant));
      if (below != 0) [[unlikely]] {
        binned_ = true;
        alignas(64) uint32_t us[16];
        _mm512_store_si512(us, u);
        for (unsigned k = 0; k < 16; ++k)
          if ((below >> k) & 1u) bin_one(us[k]);
      }
      mant = _mm512_maskz_mov_epi32(in_window, mant);
      d = _mm512_maskz_mov_epi32(in_window, d);
      vmax = _mm512_max_epu32(vmax, _mm512_and_si512(u, abs_mask));
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
    alignas(64) uint64_t lanes[4][8];
    _mm512_store_si512(lanes[0], pos);
    _mm512_store_si512(lanes[1], neg);
    _mm512_store_si512(lanes[2], sq_lo);
    _mm512_store_si512(lanes[3], sq_hi);
    unsigned __int128 t[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 8; ++l) t[k] += lanes[k][l];
    // units: a·2^(base−150) = a·2^(base−1) units of 2^−149; squares 2^(2base−2) units of 2^−298
    add_shifted(fixed_.pos, t[0], base - 1);
    add_shifted(fixed_.neg, t[1], base - 1);
    add_shifted(fixed_.sq, t[2], 2 * base - 2);
    add_shifted(fixed_.sq, t[3], 2 * base - 2 + 48);
    count_ += len;
  }
  absmax_ = std::max(absmax_, std::bit_cast<float>(_mm512_reduce_max_epu32(vmax)));
}
#pragma GCC diagnostic pop
#endif

namespace {
const bool kUseAvx512 = [] {
#ifdef SP_HAVE_EXACT_SUM_AVX512
  return __builtin_cpu_supports("avx512f") != 0;
#else
  return false;
#endif
}();
}  // namespace

bool ExactSum::simd_available() { return kUseAvx512; }

void ExactSum::add(const float* x, size_t n, bool allow_simd) {
#ifdef SP_HAVE_EXACT_SUM_AVX512
  if (allow_simd && kUseAvx512 && n >= 64) return add_window_avx512(x, n);
#endif
  add_histogram(x, n);
}

ExactSum::Settled ExactSum::settled() const {
  Settled s = fixed_;
  for (int b = 1; binned_ && b < kBins; ++b) {
    const int64_t v = sum_[b];
    // value M·2^(b−150) = M·2^(b−1) units of 2^−149; M²·2^(2b−300) = M²·2^(2b−2) units of 2^−298
    if (v > 0) add_shifted(s.pos, static_cast<unsigned __int128>(v), b - 1);
    if (v < 0) add_shifted(s.neg, static_cast<unsigned __int128>(-static_cast<__int128>(v)), b - 1);
    add_shifted(s.sq, (static_cast<unsigned __int128>(sq_hi_[b]) << 64) | sq_lo_[b], 2 * (b - 1));
  }
  normalize(s.pos);
  normalize(s.neg);
  normalize(s.sq);
  return s;
}

void ExactSum::merge(const ExactSum& o) {
  binned_ = binned_ || o.binned_;
  for (int b = 0; o.binned_ && b < kBins; ++b) {
    sum_[b] += o.sum_[b];
    const uint64_t lo = sq_lo_[b] + o.sq_lo_[b];
    sq_hi_[b] += o.sq_hi_[b] + ((lo < o.sq_lo_[b]) ? 1 : 0);
    sq_lo_[b] = lo;
  }
  for (int k = 0; k < kSumLimbs; ++k) {
    fixed_.pos[static_cast<size_t>(k)] += o.fixed_.pos[static_cast<size_t>(k)];
    fixed_.neg[static_cast<size_t>(k)] += o.fixed_.neg[static_cast<size_t>(k)];
  }
  for (int k = 0; k < kSqLimbs; ++k) fixed_.sq[static_cast<size_t>(k)] += o.fixed_.sq[static_cast<size_t>(k)];
  normalize(fixed_.pos);
  normalize(fixed_.neg);
  normalize(fixed_.sq);
  count_ += o.count_;
  nan_ += o.nan_;
  inf_ += o.inf_;
  absmax_ = std::max(absmax_, o.absmax_);
}

double ExactSum::sum() const {
  const Settled s = settled();
  const int c = compare(s.pos, s.neg);
  if (c == 0) return 0.0;
  return c > 0 ? to_double(subtract(s.pos, s.neg), -149) : -to_double(subtract(s.neg, s.pos), -149);
}

double ExactSum::sum_squares() const { return to_double(settled().sq, -298); }

double ExactSum::l2_norm() const { return std::sqrt(sum_squares()); }

std::vector<uint64_t> ExactSum::to_words() const {
  const Settled s = settled();
  std::vector<uint64_t> w;
  w.reserve(kWords);
  w.insert(w.end(), s.pos.begin(), s.pos.end());
  w.insert(w.end(), s.neg.begin(), s.neg.end());
  w.insert(w.end(), s.sq.begin(), s.sq.end());
  w.push_back(count_);
  w.push_back(nan_);
  w.push_back(inf_);
  w.push_back(std::bit_cast<uint32_t>(absmax_));
  return w;
}

ExactSum ExactSum::from_words(std::span<const uint64_t> w) {
  SP_CHECK_EQ(w.size(), kWords, "ExactSum word count");
  ExactSum s;
  size_t i = 0;
  for (auto& x : s.fixed_.pos) x = w[i++];
  for (auto& x : s.fixed_.neg) x = w[i++];
  for (auto& x : s.fixed_.sq) x = w[i++];
  normalize(s.fixed_.pos);
  normalize(s.fixed_.neg);
  normalize(s.fixed_.sq);
  s.count_ = w[i++];
  s.nan_ = w[i++];
  s.inf_ = w[i++];
  s.absmax_ = std::bit_cast<float>(static_cast<uint32_t>(w[i]));
  return s;
}

}  // namespace sp
