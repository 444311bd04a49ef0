// Gradient-norm clipping pieces with torch.nn.utils.clip_grad_norm_ semantics (PyTorch 1.13).
// Not the norm itself: the global norm is a sum over shards and ranks, computed in optim/.
// Invariant: clip_coefficient(norm, max_norm) ∈ [0, 1] for finite inputs; 1 means "no clipping".
// Reference: torch/nn/utils/clip_grad.py; docs/kernels.md §clip.
#pragma once

#include <cstdint>

namespace sp::kernels {

// coefficient = min(1, max_norm / (norm + 1e-6)), evaluated in fp32 exactly as torch evaluates
// `clip_coef = max_norm / (total_norm + 1e-6); clamp(clip_coef, max=1.0)` on an fp32 norm tensor:
// a Python float divided by a tensor is `tensor.reciprocal() * max_norm`, so
// coefficient = (1 / (f(norm) + f(1e-6))) · f(max_norm) with f() rounding to fp32.
// 1 if max_norm ≤ 0 (clipping off). A non-finite norm gives 0 (inf) or NaN (NaN), as in torch with
// error_if_nonfinite=False; callers detect non-finite gradients before they get here.
float clip_coefficient(double norm, double max_norm);

// x (n) *= s.
void scale_inplace(float* x, int64_t n, float s);

}  // namespace sp::kernels
