// Gradient clipping pieces (clip.h): the clip coefficient as torch computes it on an fp32 norm
// tensor, and an in-place scale. Not the norm: that is a cross-shard sum in optim/.
// Invariant: the coefficient is the exact fp32 expression torch evaluates (bitwise for equal norms).
// Reference: torch/nn/utils/clip_grad.py (1.13), torch/_tensor.py __rdiv__.
#include "kernels/clip.h"

namespace sp::kernels {

float clip_coefficient(double norm, double max_norm) {
  if (!(max_norm > 0.0)) return 1.0f;
  const float total = static_cast<float>(norm);
  const float coef = (1.0f / (total + 1e-6f)) * static_cast<float>(max_norm);  // torch __rtruediv__
  // torch.clamp(max=1.0) propagates NaN; so does this comparison order.
  return coef > 1.0f ? 1.0f : coef;
}

void scale_inplace(float* x, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace sp::kernels
