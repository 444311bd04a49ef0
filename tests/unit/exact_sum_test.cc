// ExactSum (core/exact_sum.h): exactness against a big-integer reference, independence from order
// and splitting, special values, and transport round trips.
#include "core/exact_sum.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "unity_id.h"

namespace sp {
namespace {
namespace SP_TEST_ID {

std::vector<float> wide_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> m(-1.0f, 1.0f);
  std::uniform_int_distribution<int> e(-30, 30);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(m(rng), e(rng));
  return v;
}

TEST(ExactSum, SmallIntegersAreExact) {
  std::vector<float> v = {1, 2, 3, -4, 0.5f};
  ExactSum s;
  s.add(v.data(), v.size());
  EXPECT_EQ(s.sum(), 2.5);
  EXPECT_EQ(s.sum_squares(), 1 + 4 + 9 + 16 + 0.25);
  EXPECT_EQ(s.absmax(), 4.0f);
  EXPECT_EQ(s.count(), 5u);
  EXPECT_TRUE(s.finite());
}

TEST(ExactSum, CancellationThatBreaksFloatSumming) {
  // 1e8 + 1 − 1e8 in float loses the 1; exact accumulation keeps it.
  std::vector<float> v = {1e8f, 1.0f, -1e8f};
  ExactSum s;
  s.add(v.data(), v.size());
  EXPECT_EQ(s.sum(), 1.0);
}

TEST(ExactSum, OrderAndSplitDoNotChangeBits) {
  std::vector<float> v = wide_values(100000, 5);
  ExactSum whole;
  whole.add(v.data(), v.size());
  std::mt19937 rng(1);
  for (int trial = 0; trial < 5; ++trial) {
    std::shuffle(v.begin(), v.end(), rng);
    // Split into uneven parts, sum each, merge in reverse.
    std::vector<size_t> cuts = {0, 1, 977, 20000, 20001, 65536, 99999, v.size()};
    std::vector<ExactSum> parts(cuts.size() - 1);
    for (size_t p = 0; p + 1 < cuts.size(); ++p) parts[p].add(v.data() + cuts[p], cuts[p + 1] - cuts[p]);
    ExactSum merged;
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) merged.merge(*it);
    EXPECT_EQ(std::bit_cast<uint64_t>(merged.sum()), std::bit_cast<uint64_t>(whole.sum()));
    EXPECT_EQ(std::bit_cast<uint64_t>(merged.sum_squares()), std::bit_cast<uint64_t>(whole.sum_squares()));
    EXPECT_EQ(merged.count(), whole.count());
  }
}

// Kind k of the long-run data below, n values: narrow blocks (Gaussian weights), wide, mixed with zeros,
// subnormals, values far below the block's largest (inside and below the window), NaN and infinities.
std::vector<float> long_run(int kind, size_t n, std::mt19937& rng) {
  std::normal_distribution<float> gauss(0.0f, 0.02f);
  std::uniform_int_distribution<int> pick(0, 99);
  const uint32_t specials[] = {0x00000001u, 0x807FFFFFu, 0x00800000u, 0x80000000u,
                               0x7F7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7FC00001u};
  std::vector<float> v = kind == 1 ? wide_values(n, 7 + static_cast<uint32_t>(n)) : std::vector<float>(n);
  for (size_t i = 0; i < n; ++i) {
    if (kind == 1) continue;
    float x = gauss(rng);
    if (kind == 2 && pick(rng) < 20) x = 0.0f;                                      // zeros
    if (kind == 3 && pick(rng) < 10) x = std::ldexp(x, -20);                        // far below the block max
    if (kind == 4 && pick(rng) < 5) x = std::bit_cast<float>(specials[i % 5]);      // subnormals, extremes
    if (kind == 5 && pick(rng) < 1) x = std::bit_cast<float>(specials[5 + i % 3]);  // inf, nan
    if (kind == 6 && pick(rng) < 3) x = std::ldexp(x, -30);                         // below any 24-bit window
    v[i] = x;
  }
  return v;
}

// add() of a long run (the AVX-512 fixed-point window where the CPU has it, and the portable four
// interleaved histograms folded per block) gives exactly what adding the values a few at a time (the
// direct path, one value per bin) gives: the same Σx and Σx² bits, count, absmax
// and special counts (the words split Σx into positive and negative parts per bin, which is not
// canonical: only their difference is), for data whose blocks are narrow (Gaussian weights), wide, mixed with zeros,
// subnormals, values far below the block's largest (inside and below the window), NaN and infinities, at lengths that
// leave block tails and cross the window path's 8192-value blocks.
TEST(ExactSum, LongRunsEqualValueByValueBins) {
  if (!ExactSum::simd_available()) std::cout << "no AVX-512F on this CPU: both runs below take the portable path\n";
  std::mt19937 rng(11);
  for (int kind = 0; kind < 7; ++kind)
    for (size_t n : {size_t{256}, size_t{4096}, size_t{12345}, size_t{8192 * 3 + 5}}) {
      const std::vector<float> v = long_run(kind, n, rng);
      ExactSum direct;
      for (size_t i = 0; i < n; i += 7) direct.add(v.data() + i, std::min<size_t>(7, n - i));
      std::vector<float> neg(v);
      for (float& x : neg) x = -x;
      for (bool simd : {true, false}) {
        const std::string what = fmt::format("kind {} n {} simd {}", kind, n, simd);
        ExactSum whole;
        whole.add(v.data(), n, simd);
        EXPECT_EQ(std::bit_cast<uint64_t>(whole.sum()), std::bit_cast<uint64_t>(direct.sum())) << what;
        EXPECT_EQ(std::bit_cast<uint64_t>(whole.sum_squares()), std::bit_cast<uint64_t>(direct.sum_squares())) << what;
        EXPECT_EQ(whole.count(), direct.count()) << what;
        // Exactly, not only after rounding: Σx of the run plus Σ(−x) value by value is exactly zero, and
        // the Σx² limbs (all non-negative, so canonical once normalized) are equal word for word.
        ExactSum diff = whole;
        for (size_t i = 0; i < n; i += 7) diff.add(neg.data() + i, std::min<size_t>(7, n - i));
        if (kind != 5) {
          EXPECT_EQ(diff.sum(), 0.0) << what;
        }
        const auto ww = whole.to_words(), dw = direct.to_words();
        const size_t sq0 = 2 * ExactSum::kSumLimbs;
        EXPECT_TRUE(std::equal(ww.begin() + sq0, ww.begin() + sq0 + ExactSum::kSqLimbs, dw.begin() + sq0)) << what;
        EXPECT_EQ(std::bit_cast<uint32_t>(whole.absmax()), std::bit_cast<uint32_t>(direct.absmax())) << what;
        EXPECT_EQ(whole.nan_count(), direct.nan_count()) << what;
        EXPECT_EQ(whole.inf_count(), direct.inf_count()) << what;
      }
    }
}

// The AVX512-IFMA block kernel and the AVX-512F integer one give the same words, every one of them: the
// positive and negative parts of Σx too, which are not canonical (above) but travel in the checksum
// all-reduce, hence in the trace's payload digests. A faster kernel must not move a byte of evidence.
TEST(ExactSum, IfmaKernelGivesTheIntegerKernelsWords) {
  if (!ExactSum::ifma_available()) GTEST_SKIP() << "no AVX512-IFMA on this CPU";
  std::mt19937 rng(13);
  for (int kind = 0; kind < 7; ++kind)
    for (size_t n : {size_t{64}, size_t{4096}, size_t{12345}, size_t{8192 * 3 + 5}}) {
      const std::vector<float> v = long_run(kind, n, rng);
      for (float scale : {1.0f, 0x1p-100f, 0x1p-120f, 0x1p100f}) {  // windows of every base, base 1 (subnormals) too
        std::vector<float> w(v);
        for (float& x : w) x *= scale;
        ExactSum ifma, integer;
        ifma.add(w.data(), n);
        integer.add(w.data(), n, true, false);
        EXPECT_EQ(ifma.to_words(), integer.to_words()) << fmt::format("kind {} n {} scale {}", kind, n, scale);
      }
    }
}

TEST(ExactSum, MatchesLongDoubleReferenceClosely) {
  std::vector<float> v = wide_values(5000, 9);
  long double ref = 0, ref2 = 0;
  std::vector<long double> sorted(v.begin(), v.end());
  std::sort(sorted.begin(), sorted.end(), [](long double a, long double b) { return std::fabs(a) < std::fabs(b); });
  for (long double x : sorted) ref += x;
  for (long double x : sorted) ref2 += x * x;
  ExactSum s;
  s.add(v.data(), v.size());
  EXPECT_NEAR(s.sum(), static_cast<double>(ref), 1e-12 * static_cast<double>(std::fabs(ref2)));
  EXPECT_NEAR(s.sum_squares(), static_cast<double>(ref2), 1e-15 * static_cast<double>(ref2));
}

TEST(ExactSum, SubnormalsNanInf) {
  const float sub = std::numeric_limits<float>::denorm_min();
  std::vector<float> v = {sub,
                          sub,
                          std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          2.0f};
  ExactSum s;
  s.add(v.data(), v.size());
  EXPECT_EQ(s.nan_count(), 1u);
  EXPECT_EQ(s.inf_count(), 2u);
  EXPECT_FALSE(s.finite());
  EXPECT_EQ(s.sum(), 2.0 + 2.0 * static_cast<double>(sub));
  EXPECT_EQ(s.absmax(), 2.0f);
}

TEST(ExactSum, ManySquaresDoNotOverflow) {
  // 2^20 values with the largest mantissa in one bin exercise the 64 → 128-bit flush.
  std::vector<float> v(1 << 20, 1.9999999f);
  ExactSum s;
  s.add(v.data(), v.size());
  const double want = static_cast<double>(1.9999999f) * static_cast<double>(1.9999999f) * (1 << 20);
  EXPECT_EQ(s.sum_squares(), want);
}

// The exact total is converted to double once, rounding to nearest with ties to even: 1 + 2^−53 is a
// tie (stays 1), anything above it rounds up, in either sign.
TEST(ExactSum, RoundsTheExactTotalOnceToNearestEven) {
  auto total = [](std::vector<float> v) {
    ExactSum s;
    s.add(v.data(), v.size());
    return s.sum();
  };
  const float t53 = std::ldexp(1.0f, -53), t100 = std::ldexp(1.0f, -100), big = std::ldexp(1.0f, 100);
  EXPECT_EQ(total({1.0f, t53}), 1.0);
  EXPECT_EQ(total({1.0f, t53, t100}), 1.0 + std::ldexp(1.0, -52));
  EXPECT_EQ(total({-1.0f, -t53, -t100}), -(1.0 + std::ldexp(1.0, -52)));
  EXPECT_EQ(total({big, 1.0f, -big}), 1.0);
  EXPECT_EQ(total({t100, -t100}), 0.0);
  ExactSum sq;
  const std::vector<float> v = {1.0f, std::ldexp(1.0f, -27)};  // 1 + 2^−54: below the tie, stays 1
  sq.add(v.data(), v.size());
  EXPECT_EQ(sq.sum_squares(), 1.0);
}

TEST(ExactSum, WordsRoundTrip) {
  std::vector<float> v = wide_values(1000, 3);
  ExactSum s;
  s.add(v.data(), v.size());
  const ExactSum t = ExactSum::from_words(s.to_words());
  EXPECT_EQ(std::bit_cast<uint64_t>(t.sum()), std::bit_cast<uint64_t>(s.sum()));
  EXPECT_EQ(std::bit_cast<uint64_t>(t.sum_squares()), std::bit_cast<uint64_t>(s.sum_squares()));
  EXPECT_EQ(t.absmax(), s.absmax());
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp
