// Naive AdamW twin: the textbook decoupled-weight-decay formulas (Loshchilov & Hutter 2019,
// Algorithm 2) in double, rounded to fp32 once per state tensor. Not bitwise with PyTorch (the fast
// kernel is); it checks the fast kernel's formula, not its rounding.
#include "kernels/reference/adamw.h"

#include <cmath>

namespace sp::kernels::reference {

void adamw_update(float* p, float* m, float* v, const float* grad, int64_t n, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int64_t t, float grad_scale) {
  const double step = static_cast<double>(t);
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), step);
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), step);
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(grad[i]) * grad_scale;
    double pi = static_cast<double>(p[i]) * (1.0 - static_cast<double>(lr) * weight_decay);
    const double mi = beta1 * static_cast<double>(m[i]) + (1.0 - beta1) * g;
    const double vi = beta2 * static_cast<double>(v[i]) + (1.0 - beta2) * g * g;
    const double m_hat = mi / bc1;
    const double v_hat = vi / bc2;
    pi -= static_cast<double>(lr) * m_hat / (std::sqrt(v_hat) + eps);
    p[i] = static_cast<float>(pi);
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
  }
}

}  // namespace sp::kernels::reference
