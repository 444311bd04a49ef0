#include "plan/protocol.h"

#include <algorithm>
#include <string>

#include "comm/process_grid.h"
#include "plan/promise.h"
#include "plan/run_plan.h"

namespace sp::plan {
namespace {
constexpr int64_t kAnchorsAtEveryStep = 32;  // runs up to this long (the presets, the labs) are anchored at every step
}  // namespace

Result<ProtocolPlan> plan_protocol(const config::RunConfig& config, std::string_view fault_spec) {
  const config::ParallelConfig& pc = config.parallel;
  // Bounded staleness is outside the equivalence guarantee: stage 2 (the run against the single device)
  // could only fail, so prove refuses up front and names what proves SSP instead (docs/ps.md §SSP).
  if (promised_class(config) == evidence::Equivalence::kDivergentByDesign)
    return invalid_argument(
               "prove: parallel.staleness = {} is divergent by design: a bounded-staleness run computes on stale "
               "parameters and is never equivalent to the single device, so the protocol's proof of equivalence "
               "does not apply",
               pc.staleness)
        .with_hint(
            "prove the synchronous parameter server (parallel.staleness = 0); check an SSP run with `shardproof "
            "verify RUN --against REPLAY`, REPLAY a one-process run with parallel.replay_workers = W and the same "
            "staleness (bitwise)");
  ProtocolPlan p;
  const int64_t steps = config.train.steps;
  p.checkpoint_step = config.prove.checkpoint_step > 0 ? config.prove.checkpoint_step : steps / 2;
  const int64_t k = p.checkpoint_step;
  if (k < 1 || k >= steps)
    return invalid_argument("prove.checkpoint_step = {} must lie in [1, train.steps = {})", k, steps)
        .with_hint("the recovery checkpoint needs steps before and after it");
  const std::string spec =
      !fault_spec.empty() ? std::string(fault_spec)
      : !config.prove.fault.empty()
          ? config.prove.fault
          : std::string(evidence::default_fault_name(pc.dp, pc.tp, pc.pp, pc.parameter_server() ? pc.servers : 0));
  SP_ASSIGN_OR_RETURN(p.fault, evidence::parse_fault(spec));
  if (!p.fault.any()) return invalid_argument("--fault: stage 3 needs a fault from the catalogue");
  const bool checkpoint = evidence::is_checkpoint_fault(p.fault.kind);
  if (spec.find('@') == std::string::npos) p.fault.step = checkpoint ? k - 1 : k;
  p.fault_config = config;
  p.fault_config.evidence.checkpoint_every = checkpoint ? k : 0;
  SP_ASSIGN_OR_RETURN(const RunPlan plan, RunPlan::make(p.fault_config, pc.world()));
  if (spec.find(':') == std::string::npos)
    p.fault.rank = evidence::default_fault_rank(p.fault.kind, plan.fault_target());
  SP_RETURN_IF_ERROR(evidence::check_fault_applicable(p.fault, plan.fault_target()));
  if (checkpoint && pc.zero == 0) {
    // Without ZeRO only dp rank 0 of each (tp, pp) position writes a shard (Engine::saves_state).
    SP_ASSIGN_OR_RETURN(const comm::ProcessGrid grid,
                        comm::ProcessGrid::create(pc.dp, pc.tp, pc.pp, pc.axis_order, pc.workers()));
    const comm::Coords c = grid.coords_of(p.fault.rank);
    if (c.dp != 0)
      return invalid_argument(
                 "fault {} damages world rank {}'s checkpoint shard, but rank {} ({}) writes none: with "
                 "parallel.zero = 0 only dp rank 0 saves state",
                 p.fault.to_string(), p.fault.rank, p.fault.rank, c.to_string())
          .with_hint("target a rank with dp coordinate 0, or use parallel.zero ≥ 1");
  }
  if (promised_class(config) != evidence::Equivalence::kBitwise) {
    const int64_t every = config.prove.anchor_every > 0  ? config.prove.anchor_every
                          : steps <= kAnchorsAtEveryStep ? 1
                                                         : (steps + kAnchorsAtEveryStep - 1) / kAnchorsAtEveryStep;
    for (int64_t s = 0; s < steps; s += every) p.anchors.push_back(s);
    if (p.fault.step < steps && !evidence::is_checkpoint_fault(p.fault.kind)) p.anchors.push_back(p.fault.step);
    std::sort(p.anchors.begin(), p.anchors.end());
    p.anchors.erase(std::unique(p.anchors.begin(), p.anchors.end()), p.anchors.end());
    p.fault_warmup = evidence::fault_info(p.fault.kind).history;
    for (int64_t a : p.anchors) {
      p.reference_checkpoints.push_back(a);
      if (p.fault_warmup > 0 && a >= p.fault_warmup) p.reference_checkpoints.push_back(a - p.fault_warmup);
    }
    if (config.train.eval_batches > 0) {
      p.anchored_evals = {-1, steps - 1};
      const int64_t every = config.train.eval_every, periodic = every > 0 ? steps / every : 0;
      const int64_t stride = (periodic + kAnchorsAtEveryStep - 1) / kAnchorsAtEveryStep;
      for (int64_t j = stride; j > 0 && j <= periodic; j += stride) p.anchored_evals.push_back(j * every - 1);
      std::sort(p.anchored_evals.begin(), p.anchored_evals.end());
      p.anchored_evals.erase(std::unique(p.anchored_evals.begin(), p.anchored_evals.end()), p.anchored_evals.end());
      for (int64_t s : p.anchored_evals) p.reference_checkpoints.push_back(s + 1);  // the state it evaluates
    }
    std::sort(p.reference_checkpoints.begin(), p.reference_checkpoints.end());
    p.reference_checkpoints.erase(std::unique(p.reference_checkpoints.begin(), p.reference_checkpoints.end()),
                                  p.reference_checkpoints.end());
    // The fault replay's anchors need `fault_warmup` steps before them.
    // A damaged checkpoint is not a training fault: there is nothing to replay (the checkpoint view sees it).
    if (!checkpoint)
      p.fault_anchors.assign(std::lower_bound(p.anchors.begin(), p.anchors.end(), p.fault_warmup), p.anchors.end());
  }
  return p;
}

}  // namespace sp::plan
