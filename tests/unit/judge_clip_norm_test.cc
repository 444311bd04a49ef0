// The judge's clip-norm bound (judge/context.h, clip_norm_tolerance) against the accumulation it bounds: torch's
// fp32 norm kernel, emulated — L lanes, each a sequential fused multiply-add of squares, the lanes added in order,
// then the tail, then the root — on tensors of 2^22 and 24.6 M elements (the embedding of the 105.8 M-parameter
// run whose norm the old bound 2·√Ψ·u called wrong: docs/judge.md §7). Gaussian gradients and the adversarial
// case (every lane stagnant: each square below half an ulp of its lane) stay inside the bound; the Gaussian
// case at 24.6 M is outside the old one, which is why it was replaced.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "judge/context.h"
#include "unity_id.h"

namespace sp::judge {
namespace {
namespace SP_TEST_ID {

constexpr double kUnit = 5.9604644775390625e-08;  // 2^-24

// torch's CPU norm of a contiguous fp32 tensor: one Vectorized<float> accumulator of `lanes` lanes.
float emulated_norm(const std::vector<float>& x, size_t lanes) {
  std::vector<float> acc(lanes, 0.0f);
  const size_t body = x.size() / lanes * lanes;
  for (size_t i = 0; i < body; i += lanes)
    for (size_t l = 0; l < lanes; ++l) acc[l] = std::fma(x[i + l], x[i + l], acc[l]);
  float sum = 0.0f;
  for (float a : acc) sum += a;
  for (size_t i = body; i < x.size(); ++i) sum = std::fma(x[i], x[i], sum);
  return std::sqrt(sum);
}

double exact_norm(const std::vector<float>& x) {
  long double s = 0;  // each square exact in 64 bits; n·2^-64 is far below what is measured here
  for (float v : x) s += static_cast<long double>(v) * v;
  return static_cast<double>(std::sqrt(s));
}

// N(0, 1e-4), Box–Muller on a fixed generator: the same values on every machine.
std::vector<float> gaussian(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  const double scale = 1.0 / 18446744073709551616.0;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; i += 2) {
    const double u1 = (static_cast<double>(g()) + 1) * scale, u2 = static_cast<double>(g()) * scale;
    const double r = std::sqrt(-2 * std::log(u1)) * 1e-4;
    x[i] = static_cast<float>(r * std::cos(2 * M_PI * u2));
    if (i + 1 < n) x[i + 1] = static_cast<float>(r * std::sin(2 * M_PI * u2));
  }
  return x;
}

double rel(float computed, double exact) { return std::abs(static_cast<double>(computed) - exact) / exact; }

TEST(JudgeClipNorm, GaussianGradientsInsideTheBoundAndOutsideTheOldOne) {
  for (size_t n : {size_t{1} << 22, size_t{24576000}}) {
    const std::vector<float> x = gaussian(n, n);
    const double exact = exact_norm(x);
    for (size_t lanes : n == 24576000 ? std::vector<size_t>{8} : std::vector<size_t>{4, 8, 16}) {
      const double err = rel(emulated_norm(x, lanes), exact);
      const double tol = clip_norm_tolerance(static_cast<int64_t>(n), 75, 1, static_cast<int64_t>(lanes));
      EXPECT_LE(err, tol) << n << " elements, " << lanes << " lanes";
    }
    const double old_bound = 2 * std::sqrt(static_cast<double>(n)) * kUnit;
    if (n == 24576000) {
      EXPECT_GT(rel(emulated_norm(x, 8), exact), old_bound) << "the false alarm it replaces";
    }
  }
}

TEST(JudgeClipNorm, StagnantLanesInsideTheBound) {
  // 1 in every lane first, then squares of 2^-25: each below half an ulp of 1, so every one is lost.
  const size_t n = 24576000, lanes = 8;
  std::vector<float> x(n, std::sqrt(std::ldexp(1.0f, -25)));
  for (size_t l = 0; l < lanes; ++l) x[l] = 1.0f;
  const double exact = exact_norm(x);
  const float computed = emulated_norm(x, lanes);
  EXPECT_EQ(computed, std::sqrt(8.0f)) << "the adversarial case is not stagnant: the test no longer tests it";
  const double err = rel(computed, exact);
  EXPECT_GT(err, 0.04);
  EXPECT_LE(err, clip_norm_tolerance(static_cast<int64_t>(n), 1, 1, static_cast<int64_t>(lanes)));
}

TEST(JudgeClipNorm, BoundGrowsWithLengthAndIsVacuousPastFp32) {
  EXPECT_LT(clip_norm_tolerance(65536, 75, 2, 8), 1e-3);     // test-sized models stay sensitive
  EXPECT_LT(clip_norm_tolerance(24576000, 75, 2, 8), 0.15);  // 105.8 M: a norm of half the ranks' (≈ 0.29) fails
  EXPECT_GT(clip_norm_tolerance(24576000, 75, 2, 4), clip_norm_tolerance(24576000, 75, 2, 8));
  EXPECT_TRUE(std::isinf(clip_norm_tolerance(int64_t{1} << 30, 75, 2, 8)));  // no fp32 bound: not compared
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::judge
