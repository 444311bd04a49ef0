// SwiGLU (swiglu.h): one contiguous, branch-free loop over F per row; exp_fast inlines so the
// loop vectorizes. Invariant: sigmoid saturates cleanly (exp overflow → σ = 0, no NaN for finite g).
// Reference: HF LlamaMLP act_fn = SiLU; docs/kernels.md §swiglu.
#include "kernels/swiglu.h"

#include "core/time_split.h"
#include "kernels/vec_math.h"

namespace sp::kernels {

void swiglu_forward(float* out, const float* gu, int64_t N, int64_t F) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = gu + n * 2 * F;  // (F)
    const float* up = gate + F;          // (F)
    float* o = out + n * F;              // (F)
    for (int64_t f = 0; f < F; ++f) {
      const float g = gate[f];
      const float s = 1.0f / (1.0f + exp_fast(-g));
      o[f] = (g * s) * up[f];
    }
  }
}

void swiglu_backward(float* dgu, const float* dout, const float* gu, int64_t N, int64_t F) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const float* gate = gu + n * 2 * F;  // (F)
    const float* up = gate + F;          // (F)
    const float* d = dout + n * F;       // (F)
    float* dgate = dgu + n * 2 * F;      // (F)
    float* dup = dgate + F;              // (F)
    for (int64_t f = 0; f < F; ++f) {
      const float g = gate[f];
      const float s = 1.0f / (1.0f + exp_fast(-g));
      const float dsilu = s * (1.0f + g * (1.0f - s));
      dgate[f] = (d[f] * up[f]) * dsilu;
      dup[f] = d[f] * (g * s);
    }
  }
}

}  // namespace sp::kernels
