// Cross-entropy parts (cross_entropy.h). Row passes over Vl are contiguous and vectorized through
// vec_math; nothing here allocates. Not a reduction across ranks: the caller all-reduces between parts.
// Invariant: exp_fast is used by both the sum and the backward, so each row's gradient sums to ≈ 0.
// Reference: Megatron-LM tensor_parallel/cross_entropy.py; docs/kernels.md §cross_entropy.
#include "kernels/cross_entropy.h"

#include <cmath>

#include "core/check.h"
#include "core/time_split.h"
#include "kernels/vec_math.h"

namespace sp::kernels {

void cross_entropy_row_max(float* rowmax, const float* logits, int64_t N, int64_t Vl) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) rowmax[n] = max_of(logits + n * Vl, Vl);
}

void cross_entropy_row_sumexp(float* sumexp, const float* logits, const float* rowmax, int64_t N, int64_t Vl) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) sumexp[n] = static_cast<float>(exp_shifted_sum(logits + n * Vl, rowmax[n], Vl));
}

void cross_entropy_target_logit(float* tlogit, const float* logits, const int32_t* targets, int64_t N, int64_t Vl,
                                int64_t v_begin) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t local = static_cast<int64_t>(targets[n]) - v_begin;
    tlogit[n] = targets[n] >= 0 && local >= 0 && local < Vl ? logits[n * Vl + local] : 0.0f;
  }
}

void cross_entropy_losses(float* losses, const float* rowmax, const float* sumexp, const float* tlogit,
                          const int32_t* targets, int64_t N) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const double loss =
        std::log(static_cast<double>(sumexp[n])) + static_cast<double>(rowmax[n]) - static_cast<double>(tlogit[n]);
    losses[n] = targets[n] < 0 ? 0.0f : static_cast<float>(loss);
  }
}

void cross_entropy_backward(float* dlogits, const float* logits, const float* rowmax, const float* sumexp,
                            const int32_t* targets, int64_t N, int64_t Vl, int64_t v_begin, float scale) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const float* l = logits + n * Vl;  // (Vl)
    float* d = dlogits + n * Vl;       // (Vl), may be l
    if (targets[n] < 0) {
      for (int64_t v = 0; v < Vl; ++v) d[v] = 0.0f;
      continue;
    }
    const float m = rowmax[n];
    const float inv = static_cast<float>(1.0 / static_cast<double>(sumexp[n]));
    const int64_t local = static_cast<int64_t>(targets[n]) - v_begin;
    const bool has_target = local >= 0 && local < Vl;
    const float target_logit = has_target ? l[local] : 0.0f;  // read before an in-place overwrite
    for (int64_t v = 0; v < Vl; ++v) d[v] = (exp_fast(l[v] - m) * inv) * scale;
    if (has_target) d[local] = (exp_fast(target_logit - m) * inv - 1.0f) * scale;
  }
}

double cross_entropy_forward(float* losses, float* rowmax, float* sumexp, const float* logits, const int32_t* targets,
                             int64_t N, int64_t V) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n)
    SP_CHECK_LT(static_cast<int64_t>(targets[n]), V, "cross_entropy_forward: target of token {} outside the vocabulary",
                n);
  cross_entropy_row_max(rowmax, logits, N, V);
  cross_entropy_row_sumexp(sumexp, logits, rowmax, N, V);
  cross_entropy_target_logit(losses, logits, targets, N, V, 0);  // losses holds tlogit for a moment
  cross_entropy_losses(losses, rowmax, sumexp, losses, targets, N);
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) total += static_cast<double>(losses[n]);
  return total;
}

}  // namespace sp::kernels
