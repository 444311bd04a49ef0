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
void ExactSum::bin_one(uint32_t u) {
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
namespace {
const bool kUseAvx512 = __builtin_cpu_supports("avx512f") != 0;
// The block kernel with AVX512-DQ's conversions and AVX512-IFMA's 52-bit multiply-adds (exact_sum_avx512.cc).
const bool kUseIfma = kUseAvx512 && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512ifma");
}  // namespace

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// The same exact sums without a histogram, sixteen values at a time. Per block of kWindowBlock values:
// pass 1 finds the largest magnitude, hence the largest exponent field E (a block holding an Inf or NaN
// goes to the histogram) and the absmax; pass 2 (exact_sum_avx512.cc) writes every value with bin
// b ≥ B = max(E − kWindow, 1) as a fixed-point integer in units of 2^(B−150): a = M·2^(b−B) <
// 2^(24+kWindow) = 2^48, and sums a of the positive and of the negative values and a² < 2^96 (as its low
// and high parts) in 64-bit lanes: each lane takes kWindowBlock/8 = 2^10 terms < 2^52, far from 2^64.
// The block's four lane totals are then added into the fixed-point limbs (the same units settled() uses
// for bins). A non-zero value below the window (bin < B: smaller than 2^−24 of the block's largest, rare
// in weights and gradients) goes to its bin instead. Integer arithmetic or exact floating point: the
// result is the exact sum, so it equals the histogram's bit for bit after settling, and the two pass-2
// kernels give the same words (tests/unit/exact_sum_test.cc).
__attribute__((target("avx512f"))) void ExactSum::add_window_avx512(const float* x, size_t n, bool allow_ifma) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), zero = _mm512_setzero_si512();
  for (size_t b0 = 0; b0 < n; b0 += kWindowBlock) {
    const size_t len = std::min(kWindowBlock, n - b0);
    const float* xb = x + b0;
    // Pass 1: the largest |x| bit pattern (orders as the magnitude), four chains of maxima in flight.
    __m512i m0 = zero, m1 = zero, m2 = zero, m3 = zero;
    size_t i = 0;
    for (; i + 64 <= len; i += 64) {
      m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(xb + i), abs_mask));
      m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_loadu_si512(xb + i + 16), abs_mask));
      m2 = _mm512_max_epu32(m2, _mm512_and_si512(_mm512_loadu_si512(xb + i + 32), abs_mask));
      m3 = _mm512_max_epu32(m3, _mm512_and_si512(_mm512_loadu_si512(xb + i + 48), abs_mask));
    }
    for (; i + 16 <= len; i += 16) m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_loadu_si512(xb + i), abs_mask));
    if (i < len) {
      const auto tail = static_cast<__mmask16>((1u << (len - i)) - 1);
      m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_maskz_loadu_epi32(tail, xb + i), abs_mask));
    }
    const uint32_t maxbits =
        _mm512_reduce_max_epu32(_mm512_max_epu32(_mm512_max_epu32(m0, m1), _mm512_max_epu32(m2, m3)));
    const uint32_t emax = maxbits >> 23;
    if (emax == 0xFFu) {  // an Inf or NaN: count it in the histogram
      add_short(xb, len);
      continue;
    }
    absmax_ = std::max(absmax_, std::bit_cast<float>(maxbits));
    const int base = std::max(static_cast<int>(emax) - kWindow, 1);
    alignas(64) uint64_t lanes[4][8];
    // IFMA splits a² at bit 52, the integer kernel at bit 48; base 1 (subnormals in the window) stays integer.
    const bool ifma = allow_ifma && kUseIfma && base >= 2;
    if (ifma)
      window_ifma(xb, len, base, lanes);
    else
      window_integer(xb, len, base, lanes);
    unsigned __int128 t[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; ++k)
      for (int l = 0; l < 8; ++l) t[k] += lanes[k][l];
    // units: a·2^(base−150) = a·2^(base−1) units of 2^−149; squares 2^(2base−2) units of 2^−298
    add_shifted(fixed_.pos, t[0], base - 1);
    add_shifted(fixed_.neg, t[1], base - 1);
    add_shifted(fixed_.sq, t[2], 2 * base - 2);
    add_shifted(fixed_.sq, t[3], 2 * base - 2 + (ifma ? 52 : 48));
    count_ += len;
  }
}
#pragma GCC diagnostic pop
#else
namespace {
constexpr bool kUseAvx512 = false, kUseIfma = false;
}  // namespace
#endif

bool ExactSum::simd_available() { return kUseAvx512; }
bool ExactSum::ifma_available() { return kUseIfma; }

void ExactSum::add(const float* x, size_t n, bool allow_simd, bool allow_ifma) {
#ifdef SP_HAVE_EXACT_SUM_AVX512
  if (allow_simd && kUseAvx512 && n >= 64) return add_window_avx512(x, n, allow_ifma);
#endif
  (void)allow_ifma;
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
