#include "plan/promise.h"

#include <algorithm>
#include <cmath>

#include "evidence/checksums.h"
#include "model/weights.h"

namespace sp::plan {

using evidence::Equivalence;

std::optional<std::pair<int, int>> stale_schedule(const config::RunConfig& config) {
  const config::ParallelConfig& p = config.parallel;
  if (p.staleness == 0) return std::nullopt;
  if (p.replay_workers > 0) return std::make_pair(p.replay_workers, p.staleness);
  if (p.parameter_server()) return std::make_pair(p.workers(), p.staleness);
  return std::nullopt;
}

Equivalence promised_class(const config::RunConfig& config) {
  if (stale_schedule(config)) return Equivalence::kDivergentByDesign;
  const bool bitwise = config.parallel.tp == 1 && config.parallel.reduction == config::Reduction::kDeterministic;
  return bitwise ? Equivalence::kBitwise : Equivalence::kWithinTolerance;
}

double rounding_envelope(DType t, double points) {
  if (t == DType::kF32) return 0.0;
  const double u = t == DType::kBF16 ? 0x1p-8 : 0x1p-11;  // 2^-p, p = 8 (bf16) or 11 (fp16) significand bits
  return 2.0 * std::sqrt(points) * u / std::sqrt(3.0);
}

double mixed_precision_envelope(const config::RunConfig& config) {
  return rounding_envelope(config.train.precision.compute, 13.0 * static_cast<double>(config.model.n_layers) + 4.0);
}

evidence::Tolerances tolerances_for(const config::RunConfig& config) {
  evidence::Tolerances tol;
  tol.grad_first *= std::sqrt(static_cast<double>(config.train.global_batch * config.train.seq_len));
  // Mixed precision (docs/equivalence.md §5, §"Mixed precision across topologies"): a changed fp32 sum
  // before a 16-bit rounding point moves the rounded value by a whole 16-bit ulp when it crosses a
  // boundary, and the flips propagate through the R rounding points: the 16-bit envelope replaces the
  // fp32 tolerances wherever it is larger (it always is).
  const double t16 = mixed_precision_envelope(config);
  for (double* x : {&tol.loss, &tol.param, &tol.grad_first, &tol.grad_later}) *x = std::max(*x, t16);
  return tol;
}

std::vector<evidence::RecordKey> expected_records(const config::RunConfig& config, const std::vector<int64_t>& steps) {
  std::vector<int64_t> which = steps;
  if (which.empty())
    for (int64_t s = 0; s < config.train.steps; ++s) which.push_back(s);
  const std::vector<model::WeightSpec> tensors = model::weight_table(config.model);
  const int64_t every = config.evidence.checksum_every;
  std::vector<evidence::RecordKey> out;
  for (int64_t s : which) {
    out.push_back({s, "loss", "loss"});
    if (config.train.precision.compute == DType::kF16)
      out.push_back({s, evidence::kScalerPhase, evidence::kScalerTensor});
    if (every <= 0 || s % every != 0) continue;
    for (const char* phase : {"grad", "param"})
      for (const model::WeightSpec& t : tensors) out.push_back({s, phase, t.name});
  }
  return out;
}

}  // namespace sp::plan
