// Naive twin of kernels/adamw.h (same name and signature): the textbook AdamW formulas in double,
// rounded to fp32 once per state tensor. Agrees with the fast kernel to a few ulp, not bitwise.
// Reference: Loshchilov & Hutter 2019; docs/kernels.md §adamw.
#pragma once

#include <cstdint>

namespace sp::kernels::reference {

void adamw_update(float* p, float* m, float* v, const float* grad, int64_t n, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int64_t t, float grad_scale);

}  // namespace sp::kernels::reference
