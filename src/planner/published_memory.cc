#include "planner/published_memory.h"

#include "core/check.h"

namespace sp::planner {

double zero_model_state_bytes(double psi, int n_d, int stage, const ZeroPrecision& pr) {
  SP_CHECK(n_d >= 1 && stage >= 0 && stage <= 3, "zero_model_state_bytes(n_d={}, stage={})", n_d, stage);
  const double p = pr.param_bytes, g = pr.grad_bytes, k = pr.optimizer_k, n = n_d;
  switch (stage) {
    case 0:
      return (p + g + k) * psi;
    case 1:
      return (p + g) * psi + k * psi / n;
    case 2:
      return p * psi + (g + k) * psi / n;
    default:
      return (p + g + k) * psi / n;
  }
}

std::string megatron_activation_case_name(MegatronActivationCase c) {
  switch (c) {
    case MegatronActivationCase::kNoParallelism:
      return "no parallelism";
    case MegatronActivationCase::kTensorParallel:
      return "tensor parallel";
    case MegatronActivationCase::kTensorSequenceParallel:
      return "tensor + sequence parallel";
    case MegatronActivationCase::kTensorSelective:
      return "tensor parallel + selective recompute";
    case MegatronActivationCase::kTensorSequenceSelective:
      return "tensor + sequence parallel + selective recompute";
    case MegatronActivationCase::kFullRecompute:
      return "full recompute";
  }
  return "?";
}

MegatronActivationCase megatron_activation_case(int tp, bool sequence_parallel, model::Recompute recompute) {
  if (recompute == model::Recompute::kFull) return MegatronActivationCase::kFullRecompute;
  const bool selective = recompute == model::Recompute::kSelective;
  if (sequence_parallel)
    return selective ? MegatronActivationCase::kTensorSequenceSelective
                     : MegatronActivationCase::kTensorSequenceParallel;
  if (selective) return MegatronActivationCase::kTensorSelective;
  return tp == 1 ? MegatronActivationCase::kNoParallelism : MegatronActivationCase::kTensorParallel;
}

double megatron_activation_bytes_per_layer(MegatronActivationCase c, int64_t seq_len, int64_t micro_batch,
                                           int64_t hidden, int64_t heads, int tp) {
  SP_CHECK(tp >= 1 && hidden > 0, "megatron activations with tp={} h={}", tp, hidden);
  const double s = static_cast<double>(seq_len), b = static_cast<double>(micro_batch);
  const double h = static_cast<double>(hidden), a = static_cast<double>(heads), t = tp;
  const double sbh = s * b * h, attn = 5.0 * a * s / h;
  switch (c) {
    case MegatronActivationCase::kNoParallelism:
      return sbh * (34.0 + attn);
    case MegatronActivationCase::kTensorParallel:
      return sbh * (10.0 + 24.0 / t + attn / t);
    case MegatronActivationCase::kTensorSequenceParallel:
      return sbh * (34.0 / t + attn / t);
    case MegatronActivationCase::kTensorSelective:
      return sbh * (10.0 + 24.0 / t);
    case MegatronActivationCase::kTensorSequenceSelective:
      return sbh * 34.0 / t;
    case MegatronActivationCase::kFullRecompute:
      return sbh * 2.0;
  }
  return 0.0;
}

}  // namespace sp::planner
