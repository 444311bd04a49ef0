// Naive RoPE: the forward applies the 2×2 rotation [[c, −s], [s, c]] to each pair (i, i + D/2); the
// backward applies its transpose. Angles for the tables via inverse frequencies 1/theta^(2i/D) as
// HF writes them. Reference: Su et al. 2021 §3.4; docs/kernels.md §rope.
#include "kernels/reference/rope.h"

#include <cmath>

namespace sp::kernels::reference {

namespace {

void rotate(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T, int64_t n_heads,
            int64_t D, int64_t row_stride, bool transpose) {
  const int64_t h = D / 2;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t head = 0; head < n_heads; ++head) {
        const int64_t base = (b * T + t) * row_stride + head * D;
        for (int64_t i = 0; i < h; ++i) {
          const double c = cos[t * h + i];
          const double s = transpose ? -static_cast<double>(sin[t * h + i]) : sin[t * h + i];
          const double x1 = x[base + i];
          const double x2 = x[base + i + h];
          out[base + i] = static_cast<float>(x1 * c - x2 * s);
          out[base + i + h] = static_cast<float>(x2 * c + x1 * s);
        }
      }
    }
  }
}

}  // namespace

void rope_tables(float* cos, float* sin, int64_t T, int64_t D, double theta) {
  const int64_t h = D / 2;
  for (int64_t i = 0; i < h; ++i) {
    const double inv_freq = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(D));
    for (int64_t t = 0; t < T; ++t) {
      cos[t * h + i] = static_cast<float>(std::cos(static_cast<double>(t) * inv_freq));
      sin[t * h + i] = static_cast<float>(std::sin(static_cast<double>(t) * inv_freq));
    }
  }
}

void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T, int64_t n_heads,
                  int64_t D, int64_t row_stride) {
  rotate(out, x, cos, sin, B, T, n_heads, D, row_stride, false);
}

void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B, int64_t T,
                   int64_t n_heads, int64_t D, int64_t row_stride) {
  rotate(dx, dout, cos, sin, B, T, n_heads, D, row_stride, true);
}

}  // namespace sp::kernels::reference
