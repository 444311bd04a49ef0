// AdamW (adamw.h), one fused elementwise pass in the exact operation order of PyTorch 1.13:
//   param.mul_(1 − lr·wd)                          p·f(1 − lr·wd)
//   exp_avg.mul_(β1).add_(g, alpha=1 − β1)         fma(g, f(1 − β1), m·f(β1))
//   exp_avg_sq.mul_(β2).addcmul_(g, g, 1 − β2)     fma(f(1 − β2)·g, g, v·f(β2))
//   denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)    sqrt(v)/f(bc2_sqrt) + f(eps)
//   param.addcdiv_(exp_avg, denom, value=−step_size)     p + (f(−step_size)·m)/denom
// where f() rounds a Python (double) scalar to fp32, as TensorIterator does for a float tensor.
// The gradient is first scaled as clip_grad_norm_ does: grad.mul_(clip_coef) in fp32.
#include "kernels/adamw.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "tensor/float16.h"

namespace sp::kernels {

namespace {

// The fp32 loop: p, m, v, grad (n).
void adamw_update_f32(float* p, float* m, float* v, const float* grad, int64_t n, float lr, float beta1, float beta2,
                      float eps, float weight_decay, int64_t t, float grad_scale) {
  const double lr_d = lr;
  const double step = static_cast<double>(t);
  const double bias_correction1 = 1.0 - std::pow(static_cast<double>(beta1), step);
  const double bias_correction2 = 1.0 - std::pow(static_cast<double>(beta2), step);
  const double step_size = lr_d / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);

  const float decay = static_cast<float>(1.0 - lr_d * static_cast<double>(weight_decay));
  const float b1 = beta1;
  const float one_minus_b1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  const float b2 = beta2;
  const float one_minus_b2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  const float bc2 = static_cast<float>(bias_correction2_sqrt);
  const float neg_step = static_cast<float>(-step_size);
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * grad_scale;
    const float pi = p[i] * decay;
    const float mi = std::fma(g, one_minus_b1, m[i] * b1);
    const float vi = std::fma(one_minus_b2 * g, g, v[i] * b2);
    const float denom = std::sqrt(vi) / bc2 + eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + (neg_step * mi) / denom;
  }
}

}  // namespace

void adamw_update(float* p, float* m, float* v, ConstBufView grad, float lr, float beta1, float beta2, float eps,
                  float weight_decay, int64_t t, float grad_scale) {
  SP_CHECK_GE(t, 1, "adamw_update: the step count is 1-based");
  if (grad.dtype == DType::kF32)
    return adamw_update_f32(p, m, v, grad.f32(), grad.count, lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  // A 16-bit gradient: widened exactly, block by block, into the fp32 loop (the same bits as widening it all).
  const uint16_t* g16 = grad.float16();
  float g32[kAdamWWidenBlock];
  for (int64_t b = 0; b < grad.count; b += kAdamWWidenBlock) {
    const int64_t n = std::min(kAdamWWidenBlock, grad.count - b);
    f32_from_float16(g32, g16 + b, n, grad.dtype);
    adamw_update_f32(p + b, m + b, v + b, g32, n, lr, beta1, beta2, eps, weight_decay, t, grad_scale);
  }
}

}  // namespace sp::kernels
