#include "proof/protocol.h"

#include <string>

#include "comm/process_grid.h"
#include "parallel/plan.h"

namespace sp::proof {

Result<ProtocolPlan> plan_protocol(const parallel::RunConfig& config, std::string_view fault_spec) {
  const parallel::ParallelConfig& pc = config.parallel;
  ProtocolPlan p;
  const int64_t steps = config.train.steps;
  p.checkpoint_step = config.prove.checkpoint_step > 0 ? config.prove.checkpoint_step : steps / 2;
  const int64_t k = p.checkpoint_step;
  if (k < 1 || k >= steps)
    return invalid_argument("prove.checkpoint_step = {} must lie in [1, train.steps = {})", k, steps)
        .with_hint("the recovery checkpoint needs steps before and after it");
  const std::string spec = !fault_spec.empty()          ? std::string(fault_spec)
                           : !config.prove.fault.empty() ? config.prove.fault
                                                         : std::string(evidence::default_fault_name(pc.dp, pc.tp, pc.pp));
  SP_ASSIGN_OR_RETURN(p.fault, evidence::parse_fault(spec));
  if (!p.fault.any()) return invalid_argument("--fault: stage 3 needs a fault from the catalogue");
  const bool checkpoint = evidence::is_checkpoint_fault(p.fault.kind);
  if (spec.find('@') == std::string::npos) p.fault.step = checkpoint ? k - 1 : k;
  p.fault_config = config;
  p.fault_config.evidence.checkpoint_every = checkpoint ? k : 0;
  SP_ASSIGN_OR_RETURN(const parallel::Plan plan, parallel::Plan::make(p.fault_config, pc.world()));
  SP_RETURN_IF_ERROR(evidence::check_fault_applicable(p.fault, plan.fault_target()));
  if (checkpoint && pc.zero == 0) {
    // Without ZeRO only dp rank 0 of each (tp, pp) position writes a shard (Engine::saves_state).
    SP_ASSIGN_OR_RETURN(const comm::ProcessGrid grid,
                        comm::ProcessGrid::create(pc.dp, pc.tp, pc.pp, pc.axis_order, pc.world()));
    const comm::Coords c = grid.coords_of(p.fault.rank);
    if (c.dp != 0)
      return invalid_argument(
                 "fault {} damages world rank {}'s checkpoint shard, but rank {} ({}) writes none: with "
                 "parallel.zero = 0 only dp rank 0 saves state",
                 p.fault.to_string(), p.fault.rank, p.fault.rank, c.to_string())
          .with_hint("target a rank with dp coordinate 0, or use parallel.zero ≥ 1");
  }
  return p;
}

}  // namespace sp::proof
