// What a catalogue fault needs to know of a plan (evidence::check_fault_applicable): the run's shape and,
// per world rank, whether its schedule has W passes (plan::splits_backward), which the ZB-H1 faults act on.
#include "comm/process_grid.h"
#include "plan/run_plan.h"
#include "plan/schedule.h"
#include "plan/strategy.h"

namespace sp::plan {

evidence::FaultTarget RunPlan::fault_target() const {
  const Strategy s = strategy_of(config);
  return {.dp = s.dp,
          .tp = s.tp,
          .pp = s.pp,
          .zero = s.zero,
          .world = s.world(),
          .servers = s.servers,
          .staleness = config.parallel.staleness,
          .steps = config.train.steps,
          .micro_batches = micro_batches,
          .checkpoint_every = config.evidence.checkpoint_every,
          .sequence_parallel = s.sequence_parallel,
          .weight_passes = weight_passes_by_rank()};
}

std::vector<bool> RunPlan::weight_passes_by_rank() const {
  const config::ParallelConfig& pc = config.parallel;
  std::vector<bool> out(static_cast<size_t>(world), false);
  auto grid = comm::ProcessGrid::create(pc.dp, pc.tp, pc.pp, pc.axis_order, pc.workers());
  SP_CHECK(grid.ok(), "the plan's grid: {}", grid.status().message());
  for (int rank = 0; rank < pc.workers(); ++rank)
    out[static_cast<size_t>(rank)] = splits_backward(
        schedule_actions(pc.schedule, grid->coords_of(rank).pp, pc.pp, pc.virtual_stages, local_micro_batches));
  return out;
}

}  // namespace sp::plan
