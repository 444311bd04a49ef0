// RMSNorm forward/backward (rmsnorm.h). Row reductions in double via vec_math; the elementwise
// parts are contiguous fp32 loops over C that the compiler vectorizes.
// Invariant: dw accumulates rows in order n = 0..N−1; dx is added to (residual stream).
// Reference: llm.c layernorm_backward (without the mean terms); docs/kernels.md §rmsnorm.
#include "kernels/rmsnorm.h"

#include <cmath>

#include "core/time_split.h"
#include "kernels/vec_math.h"

namespace sp::kernels {

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;  // (C)
    float* o = out + n * C;       // (C)
    const double mean_sq = sum_squares_of(xr, C) / static_cast<double>(C);
    const float r = static_cast<float>(1.0 / std::sqrt(mean_sq + static_cast<double>(eps)));
    rstd[n] = r;
    for (int64_t c = 0; c < C; ++c) o[c] = (xr[c] * r) * w[c];
  }
}

void rmsnorm_apply(float* out, const float* rstd, const float* x, const float* w, int64_t N, int64_t C) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;  // (C)
    float* o = out + n * C;       // (C)
    const float r = rstd[n];
    for (int64_t c = 0; c < C; ++c) o[c] = (xr[c] * r) * w[c];  // rmsnorm_forward's expression
  }
}

void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                      int64_t N, int64_t C) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;    // (C)
    const float* g = dout + n * C;  // (C)
    float* d = dx + n * C;          // (C)
    const double r = rstd[n];
    // ∂/∂x_c of Σ_k g_k w_k x_k r:  r·w_c·g_c − r³/C · x_c · Σ_k g_k w_k x_k
    const double wgx = dot3_of(w, g, xr, C);
    const float coef = static_cast<float>(r * r * r * wgx / static_cast<double>(C));
    const float rf = rstd[n];
    for (int64_t c = 0; c < C; ++c) d[c] += (w[c] * g[c]) * rf - coef * xr[c];
    for (int64_t c = 0; c < C; ++c) dw[c] += g[c] * (xr[c] * rf);
  }
}

}  // namespace sp::kernels
