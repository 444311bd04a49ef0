#include "core/exact_sum.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "core/check.h"

namespace sp {

void ExactSum::add(const float* x, size_t n) {
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
        if (m != 0) ++nan_; else ++inf_;
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

void ExactSum::merge(const ExactSum& other) {
  const ExactSum& o = other;
  for (int b = 0; b < kBins; ++b) {
    sum_[b] += o.sum_[b];
    const uint64_t lo = sq_lo_[b] + o.sq_lo_[b];
    sq_hi_[b] += o.sq_hi_[b] + ((lo < o.sq_lo_[b]) ? 1 : 0);
    sq_lo_[b] = lo;
  }
  count_ += o.count_;
  nan_ += o.nan_;
  inf_ += o.inf_;
  absmax_ = std::max(absmax_, o.absmax_);
}

double ExactSum::sum() const {
  // Fixed order, largest bin first, in long double: a deterministic single rounding path.
  long double acc = 0.0L;
  for (int b = kBins - 1; b >= 1; --b)
    if (sum_[b] != 0) acc += std::ldexp(static_cast<long double>(sum_[b]), b - 150);
  return static_cast<double>(acc);
}

double ExactSum::sum_squares() const {
  long double acc = 0.0L;
  for (int b = kBins - 1; b >= 1; --b) {
    const unsigned __int128 v = (static_cast<unsigned __int128>(sq_hi_[b]) << 64) + sq_lo_[b];
    if (v != 0) acc += std::ldexp(static_cast<long double>(v), 2 * (b - 150));
  }
  return static_cast<double>(acc);
}

double ExactSum::l2_norm() const { return std::sqrt(sum_squares()); }

std::vector<uint64_t> ExactSum::to_words() const {
  const ExactSum& c = *this;
  std::vector<uint64_t> w;
  w.reserve(kWords);
  for (int b = 0; b < kBins; ++b) w.push_back(static_cast<uint64_t>(c.sum_[b]));
  w.insert(w.end(), c.sq_lo_.begin(), c.sq_lo_.end());
  w.insert(w.end(), c.sq_hi_.begin(), c.sq_hi_.end());
  w.push_back(c.count_);
  w.push_back(c.nan_);
  w.push_back(c.inf_);
  w.push_back(std::bit_cast<uint32_t>(c.absmax_));
  return w;
}

ExactSum ExactSum::from_words(std::span<const uint64_t> w) {
  SP_CHECK_EQ(w.size(), kWords, "ExactSum word count");
  ExactSum s;
  for (int b = 0; b < kBins; ++b) {
    s.sum_[b] = static_cast<int64_t>(w[b]);
    s.sq_lo_[b] = w[kBins + b];
    s.sq_hi_[b] = w[2 * kBins + b];
  }
  s.count_ = w[3 * kBins];
  s.nan_ = w[3 * kBins + 1];
  s.inf_ = w[3 * kBins + 2];
  s.absmax_ = std::bit_cast<float>(static_cast<uint32_t>(w[3 * kBins + 3]));
  return s;
}

}  // namespace sp
