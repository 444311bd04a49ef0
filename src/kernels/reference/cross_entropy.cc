// Naive cross-entropy: −log softmax(logits)[target] from its definition, per element in double.
// The forward convenience computes the loss directly (log Σ e^(l − m) + m − l_target) rather than
// through the split parts, so it is an independent path for the tp = 1 case.
#include "kernels/reference/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sp::kernels::reference {

void cross_entropy_row_max(float* rowmax, const float* logits, int64_t N, int64_t Vl) {
  for (int64_t n = 0; n < N; ++n) {
    float m = -INFINITY;
    for (int64_t v = 0; v < Vl; ++v) m = std::max(m, logits[n * Vl + v]);
    rowmax[n] = m;
  }
}

void cross_entropy_row_sumexp(float* sumexp, const float* logits, const float* rowmax, int64_t N, int64_t Vl) {
  for (int64_t n = 0; n < N; ++n) {
    double s = 0.0;
    for (int64_t v = 0; v < Vl; ++v) s += std::exp(static_cast<double>(logits[n * Vl + v]) - rowmax[n]);
    sumexp[n] = static_cast<float>(s);
  }
}

void cross_entropy_target_logit(float* tlogit, const float* logits, const int32_t* targets, int64_t N, int64_t Vl,
                                int64_t v_begin) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = targets[n];
    tlogit[n] = (t >= 0 && t >= v_begin && t < v_begin + Vl) ? logits[n * Vl + (t - v_begin)] : 0.0f;
  }
}

void cross_entropy_losses(float* losses, const float* rowmax, const float* sumexp, const float* tlogit,
                          const int32_t* targets, int64_t N) {
  for (int64_t n = 0; n < N; ++n) {
    if (targets[n] < 0) {
      losses[n] = 0.0f;
    } else {
      losses[n] = static_cast<float>(std::log(static_cast<double>(sumexp[n])) + rowmax[n] - tlogit[n]);
    }
  }
}

void cross_entropy_backward(float* dlogits, const float* logits, const float* rowmax, const float* sumexp,
                            const int32_t* targets, int64_t N, int64_t Vl, int64_t v_begin, float scale) {
  std::vector<double> row(static_cast<size_t>(Vl));
  for (int64_t n = 0; n < N; ++n) {
    const int64_t t = targets[n];
    for (int64_t v = 0; v < Vl; ++v) {
      const double p = std::exp(static_cast<double>(logits[n * Vl + v]) - rowmax[n]) / sumexp[n];
      const double onehot = (v_begin + v == t) ? 1.0 : 0.0;
      row[static_cast<size_t>(v)] = t < 0 ? 0.0 : (p - onehot) * scale;
    }
    for (int64_t v = 0; v < Vl; ++v) dlogits[n * Vl + v] = static_cast<float>(row[static_cast<size_t>(v)]);
  }
}

double cross_entropy_forward(float* losses, float* rowmax, float* sumexp, const float* logits, const int32_t* targets,
                             int64_t N, int64_t V) {
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    const float* l = logits + n * V;
    double m = -INFINITY;
    for (int64_t v = 0; v < V; ++v) m = std::max(m, static_cast<double>(l[v]));
    double s = 0.0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(l[v] - m);
    rowmax[n] = static_cast<float>(m);
    sumexp[n] = static_cast<float>(s);
    const double loss = targets[n] < 0 ? 0.0 : std::log(s) + m - l[targets[n]];
    losses[n] = static_cast<float>(loss);
    total += static_cast<double>(losses[n]);
  }
  return total;
}

}  // namespace sp::kernels::reference
