// AdamW element update with torch.optim.AdamW semantics (amsgrad=False, maximize=False, not fused), step t
// 1-based, in either of PyTorch's two CPU arithmetics: 1.x `_single_tensor_adamw` (exp_avg.mul_(β1).add_(g,
// alpha=1−β1)) or 2.x `_single_tensor_adam` with decoupled decay (exp_avg.lerp_(g, 1−β1)). Not the optimizer
// object: state layout, sharding (ZeRO) and the LR schedule live in optim/.
// Bitwise contract: with the same Python (double) hyperparameters, the result equals PyTorch's CPU kernels
// (AVX2/AVX-512, their fused multiply-adds included) bit for bit; docs/kernels.md §adamw.
// Reference: Loshchilov & Hutter 2019; torch/optim/adamw.py, adam.py; twin kernels/reference/adamw.h.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "tensor/buf_view.h"

namespace sp::kernels {

// Which of PyTorch's element orders updates exp_avg (the only operation the two versions order differently;
// 2.x also takes sqrt(1 − β2^t) as (1 − β2^t)**0.5).
enum class AdamWArithmetic {
  kMulAdd,  // PyTorch 1.x: m ← fma(g, f(1−β1), m·f(β1))
  kLerp,  // PyTorch 2.x: m ← m.lerp(g, w), w = f(1−β1): fma(w, g − m, m) for |w| < 0.5, else fma(w − 1, g − m, g)
};
std::string_view adamw_arithmetic_name(AdamWArithmetic a);  // "torch1-mul-add", "torch2-lerp"

// A square root the run took that is not the correctly rounded one: element `index` (relative to p) had
// sqrt(v) = `value` there (PyTorch builds with MKL take exp_avg_sq.sqrt() through its vector math library,
// within 1 ulp). Used by the judge's replay only; sorted by index.
struct SqrtValue {
  int64_t index = 0;
  float value = 0;
};

// Every hyperparameter as the Python float (double) the optimizer holds; t is the 1-based step count.
struct AdamWStep {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t t = 1;
  float grad_scale = 1.0f;  // the clip coefficient applied to the gradient first (1: no clipping)
  AdamWArithmetic arithmetic = AdamWArithmetic::kMulAdd;
  std::span<const SqrtValue> sqrt_values = {};  // where sqrt(v) is the run's value, not the correctly rounded one
};

// p, m, v (n fp32 elements) and grad (n elements, grad.count): fp32, or BF16/F16 (mixed precision's 16-bit
// gradients), widened exactly in blocks of kAdamWWidenBlock on the stack, so that the result equals the
// update with the widened gradient bit for bit (the update is elementwise).
// With g = grad·grad_scale:
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
//   p ← p − (lr/(1−β1^t)) · m / (sqrt(v)/sqrt(1−β2^t) + eps).
// Scalars (1 − lr·wd, bias corrections, step size) in double like Python floats, then rounded to fp32.
void adamw_update(float* p, float* m, float* v, ConstBufView grad, const AdamWStep& h);
// The engine's form: fp32 hyperparameters widened to double, PyTorch 1.x's order.
void adamw_update(float* p, float* m, float* v, ConstBufView grad, float lr, float beta1, float beta2, float eps,
                  float weight_decay, int64_t t, float grad_scale);
inline constexpr int64_t kAdamWWidenBlock = 1024;

}  // namespace sp::kernels
