#include "planner/flops.h"

#include "core/check.h"

namespace sp::planner {

double block_forward_flops(const ModelShape& m, int64_t T) {
  return 2.0 * static_cast<double>(T) * static_cast<double>(m.block_matmul_params()) + attention_core_flops(m, T);
}

double attention_core_flops(const ModelShape& m, int64_t T) {
  const double t = static_cast<double>(T);
  return 4.0 * t * t * static_cast<double>(m.n_heads * m.head_dim());
}

double head_forward_flops(const ModelShape& m, int64_t T) {
  return 2.0 * static_cast<double>(T) * static_cast<double>(m.dim) * static_cast<double>(m.vocab_size);
}

StepFlops step_flops(const ModelShape& m, int64_t sequences, int64_t T, model::Recompute recompute) {
  const double L = static_cast<double>(m.n_layers), n = static_cast<double>(sequences);
  const double forward = n * (L * block_forward_flops(m, T) + head_forward_flops(m, T));
  StepFlops f;
  f.model = 3.0 * forward;
  f.hardware = f.model;
  if (recompute == model::Recompute::kFull) f.hardware += n * L * block_forward_flops(m, T);
  if (recompute == model::Recompute::kSelective) f.hardware += n * L * attention_core_flops(m, T) / 2;  // QKᵀ
  return f;
}

ChunkFlops chunk_flops(const ModelShape& m, int blocks, bool has_head, int64_t B, int64_t T, int tp,
                       model::Recompute recompute) {
  SP_CHECK(tp >= 1 && blocks >= 0, "chunk_flops(blocks={}, tp={})", blocks, tp);
  const double b = static_cast<double>(B), k = static_cast<double>(blocks);
  ChunkFlops f;
  f.forward = b * (k * block_forward_flops(m, T) + (has_head ? head_forward_flops(m, T) : 0.0)) / tp;
  f.backward = 2.0 * f.forward;
  if (recompute == model::Recompute::kFull) f.backward += b * k * block_forward_flops(m, T) / tp;
  if (recompute == model::Recompute::kSelective) f.backward += b * k * attention_core_flops(m, T) / 2 / tp;  // QKᵀ
  return f;
}

double utilization(double flops, double seconds, int devices, double peak) {
  SP_CHECK(seconds > 0 && devices > 0 && peak > 0, "utilization({}, {} s, {} devices, {} FLOP/s)", flops, seconds,
           devices, peak);
  return flops / (seconds * devices * peak);
}

}  // namespace sp::planner
