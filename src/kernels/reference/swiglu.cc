// Naive SwiGLU: silu(g) = g·σ(g) with σ(g) = 1/(1 + e^−g) and its derivative σ(g)·(1 + g·(1 − σ(g)))
// in double with std::exp. Not vectorized and not meant to be: it is the oracle of swiglu.h.
// Reference: Shazeer 2020; docs/kernels.md §swiglu.
#include "kernels/reference/swiglu.h"

#include <cmath>

namespace sp::kernels::reference {

namespace {

double sigmoid(double g) { return 1.0 / (1.0 + std::exp(-g)); }

}  // namespace

void swiglu_forward(float* out, const float* gu, int64_t N, int64_t F) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t f = 0; f < F; ++f) {
      const double g = gu[n * 2 * F + f];
      const double u = gu[n * 2 * F + F + f];
      out[n * F + f] = static_cast<float>(g * sigmoid(g) * u);
    }
}

void swiglu_backward(float* dgu, const float* dout, const float* gu, int64_t N, int64_t F) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t f = 0; f < F; ++f) {
      const double g = gu[n * 2 * F + f];
      const double u = gu[n * 2 * F + F + f];
      const double d = dout[n * F + f];
      const double s = sigmoid(g);
      dgu[n * 2 * F + f] = static_cast<float>(d * u * s * (1.0 + g * (1.0 - s)));
      dgu[n * 2 * F + F + f] = static_cast<float>(d * g * s);
    }
}

}  // namespace sp::kernels::reference
