// Fixed-lane row reductions (vec_math.h). Each loop body is written per lane so that the compiler
// maps the 16 lanes onto vector registers; the lane combination order below never changes.
// Invariant: lane k takes elements i ≡ k (mod 16), tails included; the fold is fold_lanes().
#include "kernels/vec_math.h"

namespace sp::kernels {

namespace {

constexpr int kLanes = 16;

// ((0+8)+(4+12)) + ((2+10)+(6+14)) + … : a fixed pairwise fold of the 16 lanes.
double fold_lanes(const double* acc) {
  double half[8];
  for (int k = 0; k < 8; ++k) half[k] = acc[k] + acc[k + 8];
  double quarter[4];
  for (int k = 0; k < 4; ++k) quarter[k] = half[k] + half[k + 4];
  return (quarter[0] + quarter[2]) + (quarter[1] + quarter[3]);
}

}  // namespace

float max_of(const float* x, int64_t n) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  float acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = kNegInf;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] = x[i + k] > acc[k] ? x[i + k] : acc[k];
  float m = kNegInf;
  for (int k = 0; k < kLanes; ++k) m = acc[k] > m ? acc[k] : m;
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

double sum_of(const float* x, int64_t n) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(x[i + k]);
  for (int k = 0; i + k < n; ++k) acc[k] += static_cast<double>(x[i + k]);
  return fold_lanes(acc);
}

double sum_squares_of(const float* x, int64_t n) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) {
      const double v = x[i + k];
      acc[k] += v * v;
    }
  for (int k = 0; i + k < n; ++k) {
    const double v = x[i + k];
    acc[k] += v * v;
  }
  return fold_lanes(acc);
}

double dot_of(const float* a, const float* b, int64_t n) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(a[i + k]) * static_cast<double>(b[i + k]);
  for (int k = 0; i + k < n; ++k) acc[k] += static_cast<double>(a[i + k]) * static_cast<double>(b[i + k]);
  return fold_lanes(acc);
}

double dot3_of(const float* a, const float* b, const float* c, int64_t n) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k)
      acc[k] += static_cast<double>(a[i + k]) * static_cast<double>(b[i + k]) * static_cast<double>(c[i + k]);
  for (int k = 0; i + k < n; ++k)
    acc[k] += static_cast<double>(a[i + k]) * static_cast<double>(b[i + k]) * static_cast<double>(c[i + k]);
  return fold_lanes(acc);
}

double exp_shifted_sum(const float* x, float shift, int64_t n) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += static_cast<double>(exp_fast(x[i + k] - shift));
  for (int k = 0; i + k < n; ++k) acc[k] += static_cast<double>(exp_fast(x[i + k] - shift));
  return fold_lanes(acc);
}

double exp_shifted_store(float* y, const float* x, float shift, int64_t n) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int k = 0; k < kLanes; ++k) {
      const float e = exp_fast(x[i + k] - shift);
      y[i + k] = e;
      acc[k] += static_cast<double>(e);
    }
  for (int k = 0; i + k < n; ++k) {
    const float e = exp_fast(x[i + k] - shift);
    y[i + k] = e;
    acc[k] += static_cast<double>(e);
  }
  return fold_lanes(acc);
}

}  // namespace sp::kernels
