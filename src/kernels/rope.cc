// RoPE (rope.h). Each pair (i, i + h) is read into registers before either element is written,
// so out == x is safe; the loop over i is contiguous and vectorizes.
// Invariant: only the first n_heads·D values of a row are read or written.
// Reference: HF apply_rotary_pos_emb (rotate_half); docs/kernels.md §rope.
#include "kernels/rope.h"

#include <cmath>

#include "core/check.h"
#include "core/time_split.h"

namespace sp::kernels {

namespace {

// One head: rotates pairs (i, i + h) by the angle whose cosine/sine are c[i], s[i]. sign = +1 for
// the forward rotation, −1 for the backward (rotation by −angle).
inline void rotate_head(float* out, const float* x, const float* c, const float* s, int64_t h, float sign) {
  for (int64_t i = 0; i < h; ++i) {
    const float a = x[i];
    const float b = x[i + h];
    const float si = sign * s[i];
    out[i] = a * c[i] - b * si;
    out[i + h] = b * c[i] + a * si;
  }
}

void rope_apply(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T, int64_t n_heads,
                int64_t D, int64_t row_stride, float sign) {
  SP_CHECK(D % 2 == 0, "rope: head dim D = {} must be even", D);
  SP_CHECK_GE(row_stride, n_heads * D, "rope: row_stride shorter than n_heads·D");
  const int64_t h = D / 2;
  for (int64_t n = 0; n < B * T; ++n) {
    const int64_t t = n % T;
    const float* c = cos + t * h;  // (D/2)
    const float* s = sin + t * h;  // (D/2)
    for (int64_t head = 0; head < n_heads; ++head) {
      const int64_t off = n * row_stride + head * D;
      rotate_head(out + off, x + off, c, s, h, sign);
    }
  }
}

}  // namespace

void rope_tables(float* cos, float* sin, int64_t T, int64_t D, double theta) {
  SP_CHECK(D % 2 == 0, "rope: head dim D = {} must be even", D);
  const int64_t h = D / 2;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t i = 0; i < h; ++i) {
      const double angle =
          static_cast<double>(t) * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(D));
      cos[t * h + i] = static_cast<float>(std::cos(angle));
      sin[t * h + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T, int64_t n_heads,
                  int64_t D, int64_t row_stride) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  rope_apply(out, x, cos, sin, B, T, n_heads, D, row_stride, 1.0f);
}

void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B, int64_t T,
                   int64_t n_heads, int64_t D, int64_t row_stride) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  rope_apply(dx, dout, cos, sin, B, T, n_heads, D, row_stride, -1.0f);
}

}  // namespace sp::kernels
