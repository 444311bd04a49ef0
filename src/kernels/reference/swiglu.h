// Naive twin of kernels/swiglu.h (same names, signatures and semantics), in double with std::exp:
// the oracle for tests, not for training.
// Reference: HF LlamaMLP; docs/kernels.md §swiglu.
#pragma once

#include <cstdint>

namespace sp::kernels::reference {

void swiglu_forward(float* out, const float* gu, int64_t N, int64_t F);
void swiglu_backward(float* dgu, const float* dout, const float* gu, int64_t N, int64_t F);

}  // namespace sp::kernels::reference
