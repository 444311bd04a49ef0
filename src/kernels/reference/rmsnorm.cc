// Naive RMSNorm: every quantity in double except the saved rstd, which the backward reads back as
// fp32 like the fast kernel (eps is not an argument of the backward). The backward is the
// derivative written out: ∂r/∂x_k = −r³·x_k/C. Reference: Zhang & Sennrich 2019, §3.
#include "kernels/reference/rmsnorm.h"

#include <cmath>
#include <vector>

namespace sp::kernels::reference {

namespace {

double row_rstd(const float* x, int64_t C, double eps) {
  double ss = 0.0;
  for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(x[c]) * x[c];
  return 1.0 / std::sqrt(ss / static_cast<double>(C) + eps);
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps) {
  for (int64_t n = 0; n < N; ++n) {
    const double r = row_rstd(x + n * C, C, eps);
    rstd[n] = static_cast<float>(r);
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = static_cast<float>(x[n * C + c] * r * w[c]);
  }
}

void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                      int64_t N, int64_t C) {
  std::vector<double> dw_acc(static_cast<size_t>(C), 0.0);
  for (int64_t n = 0; n < N; ++n) {
    const double r = rstd[n];
    // out_c = x_c·r·w_c with r = (Σx²/C + eps)^(−1/2), ∂r/∂x_k = −r³·x_k/C.
    double s = 0.0;  // Σ_k dout_k·w_k·x_k
    for (int64_t k = 0; k < C; ++k) s += static_cast<double>(dout[n * C + k]) * w[k] * x[n * C + k];
    for (int64_t c = 0; c < C; ++c) {
      const double g = dout[n * C + c];
      const double d = g * w[c] * r - r * r * r * x[n * C + c] * s / static_cast<double>(C);
      dx[n * C + c] = static_cast<float>(static_cast<double>(dx[n * C + c]) + d);
      dw_acc[static_cast<size_t>(c)] += g * x[n * C + c] * r;
    }
  }
  for (int64_t c = 0; c < C; ++c)
    dw[c] = static_cast<float>(static_cast<double>(dw[c]) + dw_acc[static_cast<size_t>(c)]);
}

}  // namespace sp::kernels::reference
