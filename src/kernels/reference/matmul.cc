// Naive linear layers and gemm: one double-accumulated dot product per output element, written as
// the definition of the product. Not fast and not meant to be: it is the oracle of matmul.h.
// Accumulation rules are the fast kernels' (dw +=, dx = or += by flag, gemm alpha/beta).
#include "kernels/reference/matmul.h"

namespace sp::kernels::reference {

void gemm(float* c, const float* a, const float* b, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
          int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double aik = trans_a ? a[k * lda + i] : a[i * lda + k];
        const double bkj = trans_b ? b[j * ldb + k] : b[k * ldb + j];
        acc += aik * bkj;
      }
      const double old = beta == 0.0f ? 0.0 : static_cast<double>(beta) * c[i * ldc + j];
      c[i * ldc + j] = static_cast<float>(static_cast<double>(alpha) * acc + old);
    }
  }
}

void linear_forward(float* y, const float* x, const float* w, int64_t N, int64_t IC, int64_t OC) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < OC; ++o) {
      double acc = 0.0;
      for (int64_t i = 0; i < IC; ++i) acc += static_cast<double>(x[n * IC + i]) * w[o * IC + i];
      y[n * OC + o] = static_cast<float>(acc);
    }
  }
}

void linear_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t N, int64_t IC,
                     int64_t OC, bool accumulate_dx) {
  if (dx != nullptr) {
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t i = 0; i < IC; ++i) {
        double acc = 0.0;
        for (int64_t o = 0; o < OC; ++o) acc += static_cast<double>(dy[n * OC + o]) * w[o * IC + i];
        const double old = accumulate_dx ? static_cast<double>(dx[n * IC + i]) : 0.0;
        dx[n * IC + i] = static_cast<float>(old + acc);
      }
    }
  }
  if (dw != nullptr) {
    for (int64_t o = 0; o < OC; ++o) {
      for (int64_t i = 0; i < IC; ++i) {
        double acc = 0.0;
        for (int64_t n = 0; n < N; ++n) acc += static_cast<double>(dy[n * OC + o]) * x[n * IC + i];
        dw[o * IC + i] = static_cast<float>(static_cast<double>(dw[o * IC + i]) + acc);
      }
    }
  }
}

}  // namespace sp::kernels::reference
