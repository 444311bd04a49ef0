// Naive twins of kernels/matmul.h: plain loops, double accumulation, no BLAS. They are the oracle
// the fast kernels are tested against (tests/unit/kernels_grad_test.cc), not code to run in training.
// Same names, signatures and accumulation rules as the fast versions.
#pragma once

#include <cstdint>

namespace sp::kernels::reference {

void gemm(float* c, const float* a, const float* b, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
          int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta);
void linear_forward(float* y, const float* x, const float* w, int64_t N, int64_t IC, int64_t OC);
void linear_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t N, int64_t IC,
                     int64_t OC, bool accumulate_dx);

}  // namespace sp::kernels::reference
