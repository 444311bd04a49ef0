// Naive twin of kernels/rmsnorm.h (same names, signatures and accumulation rules), every quantity
// in double: the oracle for tests, not for training.
// Reference: HF LlamaRMSNorm; docs/kernels.md §rmsnorm.
#pragma once

#include <cstdint>

namespace sp::kernels::reference {

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps);
void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                      int64_t N, int64_t C);

}  // namespace sp::kernels::reference
