// Deterministic, vectorizable float math shared by the kernels: exp_fast and fixed-lane row sums.
// Not a libm: exp_fast flushes results below FLT_MIN to +0 and is accurate to ≤ 2 ulp (measured
// 1.01 ulp over every float in [ln FLT_MIN, ln FLT_MAX], tests/unit/kernels_vec_math_test.cc).
// Invariant: every function is a fixed sequence of IEEE operations written out in the source
// (explicit std::fma, explicit lanes, no reassociation; the build uses -ffp-contract=off), so the
// same input gives the same bits at any vector width, optimization level and thread count.
// Reference: Cephes expf (S. L. Moshier) polynomial with Cody–Waite range reduction; docs/kernels.md.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace sp::kernels {

// e^x in fp32. |error| ≤ 2 ulp for ln(FLT_MIN) ≤ x ≤ ln(FLT_MAX); +0 below (std::exp would give a
// subnormal); +inf above; NaN in, NaN out. Branch-free so that loops calling it vectorize.
inline float exp_fast(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  constexpr float kLn2Hi = 0.693359375f;      // ln 2 = kLn2Hi + kLn2Lo; kLn2Hi has 9 bits, n·kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kMinArg = -87.3365447505f;  // ln(FLT_MIN)
  constexpr float kMaxArg = 88.7228391117f;   // ln(FLT_MAX)
  float xc = x < -88.0f ? -88.0f : x;         // keeps n in [-127, 128] (NaN passes through and is fixed below)
  xc = xc > 89.0f ? 89.0f : xc;
  // n = round(x / ln 2), r = x − n·ln 2 in [−ln2/2, ln2/2].
  const float t = std::fma(xc, kLog2e, kRoundMagic);
  const float n = t - kRoundMagic;
  const int32_t ni = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRoundMagic);
  float r = std::fma(n, -kLn2Hi, xc);
  r = std::fma(n, -kLn2Lo, r);
  // e^r = 1 + r + r²·P(r), Cephes minimax coefficients.
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  p = std::fma(p, r * r, r);
  p = p + 1.0f;
  // 2^n as two normal powers of two (n can be 128 or −127, outside one exponent field).
  const int32_t n1 = ni >> 1;
  const int32_t n2 = ni - n1;
  // Unsigned shifts: for a NaN input ni is garbage (the result is replaced below), never UB.
  const float s1 = std::bit_cast<float>(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<uint32_t>(n2 + 127) << 23);
  float y = (p * s1) * s2;
  y = x < kMinArg ? 0.0f : y;
  y = x > kMaxArg ? std::numeric_limits<float>::infinity() : y;
  y = x != x ? x : y;
  return y;
}

// Row helpers. Sums run over 16 interleaved double lanes (lane k takes i ≡ k mod 16) that are then
// combined in a fixed pairwise order: deterministic, and vectorized by the compiler.

// max_i x[i]; −inf for n = 0. NaN-free inputs assumed (a NaN may or may not win).
float max_of(const float* x, int64_t n);
// Σ x[i] in double.
double sum_of(const float* x, int64_t n);
// Σ x[i]² in double.
double sum_squares_of(const float* x, int64_t n);
// Σ a[i]·b[i] in double.
double dot_of(const float* a, const float* b, int64_t n);
// Σ a[i]·b[i]·c[i] in double.
double dot3_of(const float* a, const float* b, const float* c, int64_t n);
// Σ exp_fast(x[i] − shift) in double, nothing stored.
double exp_shifted_sum(const float* x, float shift, int64_t n);
// y[i] = exp_fast(x[i] − shift); returns Σ y[i] in double. y may alias x.
double exp_shifted_store(float* y, const float* x, float shift, int64_t n);

}  // namespace sp::kernels
