// vec_math: exp_fast accuracy over a sweep of fp32 inputs against double exp, its special values,
// the fixed-lane row sums against naive double sums, and vector-width independence of the bits.
// The ≤ 2 ulp bound is the one documented in vec_math.h and docs/kernels.md.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "kernels/vec_math.h"
#include "unity_id.h"

namespace sp::kernels {
namespace {
namespace SP_TEST_ID {

// Error of y against the exact value e^x, in units of the last place of the fp32 result.
double ulp_error(float y, float x) {
  const double exact = std::exp(static_cast<double>(x));
  const float rounded = static_cast<float>(exact);
  const double ulp = static_cast<double>(std::nextafter(rounded, std::numeric_limits<float>::infinity())) - rounded;
  return std::fabs(static_cast<double>(y) - exact) / ulp;
}

TEST(KernelsVecMath, ExpFastWithinTwoUlpOverTheNormalRange) {
  // Every 97th fp32 bit pattern that lies in [ln FLT_MIN, ln FLT_MAX] (≈ 23 M inputs, both signs;
  // all ≈ 2.2 G were checked once offline: max 1.01 ulp). Results that would be subnormal are
  // excluded (exp_fast flushes them).
  const float lo = -87.33654f;
  const float hi = 88.72283f;
  double worst = 0.0;
  float worst_x = 0.0f;
  int64_t count = 0;
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 97) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (!(x >= lo && x <= hi)) continue;
    const double e = ulp_error(exp_fast(x), x);
    if (e > worst) {
      worst = e;
      worst_x = x;
    }
    ++count;
  }
  EXPECT_GT(count, 20'000'000);
  EXPECT_LE(worst, 2.0) << "worst input " << worst_x;
}

TEST(KernelsVecMath, ExpFastSpecialValues) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_fast(0.0f), 1.0f);
  EXPECT_EQ(exp_fast(-0.0f), 1.0f);
  EXPECT_EQ(exp_fast(-kInf), 0.0f);
  EXPECT_EQ(exp_fast(kInf), kInf);
  EXPECT_TRUE(std::isnan(exp_fast(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(exp_fast(-std::numeric_limits<float>::quiet_NaN())));
  // NaN in a vectorized row: that element is NaN, its neighbours are untouched, the sum is NaN.
  std::vector<float> row(37, 0.5f), out(37);
  row[20] = -std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(exp_shifted_store(out.data(), row.data(), 0.0f, 37)));
  for (int i = 0; i < 37; ++i) EXPECT_EQ(std::isnan(out[i]), i == 20) << i;
  EXPECT_EQ(exp_fast(-88.0f), 0.0f);  // below ln FLT_MIN: flushed to +0
  EXPECT_EQ(exp_fast(-1000.0f), 0.0f);
  EXPECT_EQ(exp_fast(89.0f), kInf);  // above ln FLT_MAX
  EXPECT_EQ(exp_fast(1000.0f), kInf);
  // The largest finite results (n = 128 needs the split power of two) stay finite and accurate.
  const float near_max = 88.72f;
  EXPECT_TRUE(std::isfinite(exp_fast(near_max)));
  EXPECT_LE(ulp_error(exp_fast(near_max), near_max), 2.0);
  EXPECT_LE(ulp_error(exp_fast(88.5f), 88.5f), 2.0);
  // The smallest normal results.
  EXPECT_LE(ulp_error(exp_fast(-87.3f), -87.3f), 2.0);
  EXPECT_GE(exp_fast(-87.3f), std::numeric_limits<float>::min());
  EXPECT_EQ(exp_fast(1.0f), static_cast<float>(std::exp(1.0)));
}

std::vector<float> random_row(int64_t n, uint64_t seed, double scale) {
  const PhiloxKey key = philox_key(seed, "vec_math");
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(scale * random_normal(key, i));
  return x;
}

TEST(KernelsVecMath, RowReductionsMatchNaiveDoubleSums) {
  for (int64_t n : {0, 1, 7, 15, 16, 17, 33, 255, 1000}) {
    const std::vector<float> a = random_row(n, 1, 3.0);
    const std::vector<float> b = random_row(n, 2, 1.0);
    const std::vector<float> c = random_row(n, 3, 1.0);
    double sum = 0.0, sq = 0.0, dot = 0.0, dot3 = 0.0, sum_exp = 0.0;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      sum += a[i];
      sq += static_cast<double>(a[i]) * a[i];
      dot += static_cast<double>(a[i]) * b[i];
      dot3 += static_cast<double>(a[i]) * b[i] * c[i];
      mx = std::max(mx, a[i]);
    }
    for (int64_t i = 0; i < n; ++i) sum_exp += std::exp(static_cast<double>(a[i]) - mx);
    // Double sums of ≤ 1000 fp32 terms: relative error ≤ 1000·2^-53 of Σ|terms|.
    const double tol = 1e-12 * (1.0 + sq);
    EXPECT_NEAR(sum_of(a.data(), n), sum, tol) << n;
    EXPECT_NEAR(sum_squares_of(a.data(), n), sq, tol) << n;
    EXPECT_NEAR(dot_of(a.data(), b.data(), n), dot, tol) << n;
    EXPECT_NEAR(dot3_of(a.data(), b.data(), c.data(), n), dot3, tol) << n;
    EXPECT_EQ(max_of(a.data(), n), mx) << n;
    // exp_fast terms: ≤ 2 ulp each, so the sum is within 2·2^-24 relative.
    EXPECT_NEAR(exp_shifted_sum(a.data(), mx, n), sum_exp, 2.4e-7 * sum_exp) << n;
    std::vector<float> y(static_cast<size_t>(n));
    EXPECT_EQ(exp_shifted_store(y.data(), a.data(), mx, n), exp_shifted_sum(a.data(), mx, n)) << n;
  }
}

TEST(KernelsVecMath, VectorizedAndScalarExpGiveTheSameBits) {
  // exp_shifted_store runs exp_fast in vector lanes (and a scalar tail); every element must equal a
  // scalar call, whatever its position: the result depends on the input only.
  const std::vector<float> x = random_row(1003, 4, 20.0);
  std::vector<float> y(x.size());
  exp_shifted_store(y.data(), x.data(), 1.5f, static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    volatile float xi = x[i] - 1.5f;  // keeps this call scalar
    EXPECT_EQ(y[i], exp_fast(xi)) << i;
  }
  // In place (y aliases x) gives the same values.
  std::vector<float> z = x;
  exp_shifted_store(z.data(), z.data(), 1.5f, static_cast<int64_t>(z.size()));
  EXPECT_EQ(z, y);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::kernels
