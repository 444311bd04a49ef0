// AdamW element update with torch.optim.AdamW semantics (PyTorch 1.13 `_single_tensor_adamw`,
// foreach=False, amsgrad=False, maximize=False), step t 1-based. Not the optimizer object: state
// layout, sharding (ZeRO) and the LR schedule live in optim/.
// Bitwise contract: for hyperparameters that are the same fp32 values widened to double on both
// sides, the result equals PyTorch 1.13's CPU (AVX2/AVX-512 kernels) bit for bit, including its two
// fused multiply-adds (add_ with alpha and addcmul_ compile to FMA there); docs/kernels.md §adamw.
// Reference: Loshchilov & Hutter 2019; torch/optim/adamw.py; twin kernels/reference/adamw.h.
#pragma once

#include <cstdint>

#include "tensor/buf_view.h"

namespace sp::kernels {

// p, m, v (n fp32 elements) and grad (n elements, grad.count): fp32, or BF16/F16 (mixed precision's 16-bit
// gradients), widened exactly in blocks of kAdamWWidenBlock on the stack, so that the result equals the
// update with the widened gradient bit for bit (the update is elementwise).
// With g = grad·grad_scale (grad_scale = the clip coefficient, 1 when off):
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
//   p ← p − (lr/(1−β1^t)) · m / (sqrt(v)/sqrt(1−β2^t) + eps).
// Scalars (1 − lr·wd, bias corrections, step size) in double like Python floats, then rounded to fp32.
void adamw_update(float* p, float* m, float* v, ConstBufView grad, float lr, float beta1, float beta2, float eps,
                  float weight_decay, int64_t t, float grad_scale);
inline constexpr int64_t kAdamWWidenBlock = 1024;

}  // namespace sp::kernels
