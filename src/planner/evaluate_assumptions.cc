// The assumptions `plan` prints under its figures (docs/plan.md): the time model's, how compute was priced,
// what the states' memory assumed, and how the passes are ordered.
#include <fmt/format.h>

#include "kernels/reduce.h"
#include "model/precision.h"
#include "planner/collective_time.h"
#include "planner/evaluate.h"

namespace sp::planner {
namespace {

// What the memory figures assumed (issue 33): the precision of every model state, the GEMM dtype the time is
// priced at, and the engine's gradient accumulation with its full-size buffers per unit.
std::vector<std::string> state_assumptions(const config::RunConfig& c, const plan::RunPlan& plan,
                                           const std::string& dtype) {
  const model::Precision& p = c.train.precision;
  const std::string_view compute = model::precision_name(p.compute), grad = model::precision_name(p.grad);
  std::vector<std::string> out;
  out.push_back(fmt::format(
      "states planned at train.precision = {}: parameters {} ({} bytes per element), gradients {} ({} bytes), "
      "Adam moments fp32 (8 bytes per element){}; ZeRO-{} partitions {} over dp = {}; GEMMs priced at the {} "
      "peak (--dtype sets the speed only; --precision sets the states)",
      compute, compute, p.mixed() ? 2 : 4, grad, p.grad == DType::kF32 ? 4 : 2,
      p.mixed() ? " plus fp32 master weights (4 bytes per element)" : "", c.parallel.zero,
      c.parallel.zero == 0   ? "nothing"
      : c.parallel.zero == 1 ? "the optimizer state"
      : c.parallel.zero == 2 ? "the optimizer state and the gradients"
                             : "the optimizer state, the gradients and the parameters",
      c.parallel.dp, dtype));
  const int64_t k = plan.local_micro_batches;
  if (c.parallel.reduction == config::Reduction::kFast)
    out.push_back(fmt::format(
        "gradient accumulation: parallel.reduction = fast keeps one full-size gradient buffer per unit, into which "
        "the k = {} micro-batch{} per rank add in order (docs/memory.md §\"Gradient buffers\")",
        k, k == 1 ? "" : "es"));
  else
    out.push_back(fmt::format(
        "gradient accumulation: the engine's deterministic canonical tree over k = {} micro-batch{} per rank keeps "
        "up to {} full-size gradient buffer{} per unit alive (log2(k) + 1: the bits do not depend on how "
        "micro-batches are grouped), which the gradient category counts",
        k, k == 1 ? "" : "es", kernels::canonical_accumulator_peak_buffers(k),
        kernels::canonical_accumulator_peak_buffers(k) == 1 ? "" : "s"));
  return out;
}

}  // namespace

std::vector<std::string> evaluation_assumptions(const PlanQuery& q, const PlanEvaluation& e, double peak) {
  std::vector<std::string> out = time_model_assumptions();
  if (e.measured_rates)
    out.push_back(fmt::format(
        "compute priced with the cluster's measured rates ({} peak {:.4g} TFLOP/s per device; planner/kernel_costs.h): "
        "every GEMM of the step at the measured efficiency for its FLOPs, attention at the measured seconds per "
        "(sequence, head), the memory-bound kernels (norms, SwiGLU, RoPE, cross-entropy, residual adds, the gradient "
        "tree, casts, AdamW) and the evidence (the checksums' exact sums, the trace's and the replica check's XXH3 "
        "digests of the bytes they read) at the bandwidth measured for their family and size",
        q.dtype, peak / 1e12));
  else
    out.push_back(fmt::format(
        "GEMMs (2 FLOPs per multiply-add, planner/flops.h) run at {:.0f} % of the {} peak, {:.4g} TFLOP/s per device "
        "(a stated efficiency, not measured); nothing else (norms, softmax, the optimizer) takes time",
        100 * q.efficiency, q.dtype, peak / 1e12));
  for (std::string& line : state_assumptions(q.config, e.plan, q.dtype)) out.push_back(std::move(line));
  if (e.plan.stream_bytes != 4)
    out.push_back(fmt::format(
        "the residual stream, the tensor-parallel sums and the pipeline messages are priced at {} bytes a value, as "
        "the published run kept them; the engine keeps them in fp32 (4 bytes), so this is not the engine's run",
        e.plan.stream_bytes));
  out.push_back(
      "no overlap: tensor-parallel and ZeRO-3 collectives inside each pass (spread evenly over a rank's passes), then "
      "the pipeline, then the gradient sync, the optimizer's collectives and the evidence; the engine starts each "
      "unit's dp sync during the backward (parallel.overlap_buckets), but with MPI over shared memory the cores copy "
      "the bytes inside its calls, so the sync is priced after the pipeline");
  out.push_back(
      "the pipeline is simulated over the engine's schedule with asynchronous sends (the engine's blocking sends can "
      "only be slower)");
  return out;
}

}  // namespace sp::planner
