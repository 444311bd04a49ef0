// The ledger model's input for one rank of a planned run (plan/ledger_model.h): which chunks it holds,
// its schedule of one step, its share of the evaluation, or a server's pieces.
#include <algorithm>
#include <vector>

#include "plan/ledger_model.h"
#include "plan/ps_keys.h"
#include "plan/schedule.h"

namespace sp::plan {

LedgerModelInput ledger_model_input(const RunPlan& plan, const comm::Coords& coords, int64_t eval_batches) {
  const config::RunConfig& c = plan.config;
  const config::ParallelConfig& pc = c.parallel;
  LedgerModelInput in;
  in.model = c.model;
  in.dp = pc.parameter_server() ? 1 : pc.dp;  // a worker's dp axis is itself: no staging, no shards
  in.owns_optimizer = !pc.parameter_server();
  in.tp = pc.tp;
  in.pp = pc.pp;
  in.dp_rank = coords.dp;
  in.tp_rank = coords.tp;
  in.zero = pc.zero;
  in.deterministic = pc.reduction == config::Reduction::kDeterministic;
  in.overlap_buckets = in.dp > 1 ? pc.overlap_buckets : 0;  // as the engine: nothing to overlap at dp = 1
  in.micro_batch_size = c.train.micro_batch_size;
  in.seq_len = c.train.seq_len;
  in.recompute = c.train.recompute;
  in.sequence_parallel = pc.sequence_parallel;
  in.param_bytes = static_cast<int64_t>(dtype_size(c.train.precision.compute));
  in.grad_bytes = static_cast<int64_t>(dtype_size(c.train.precision.grad));
  in.stream_bytes = plan.stream_bytes;
  in.gemm16 = plan.gemm16;
  for (const ChunkPlacement& p : plan.chunks_of(coords.pp))
    in.chunks.push_back({p.layer_begin, p.layer_end, p.first, p.last});
  for (const PipeAction& a :
       schedule_actions(pc.schedule, coords.pp, pc.pp, pc.virtual_stages, plan.local_micro_batches))
    in.train_actions.push_back(a);
  in.split_backward = splits_backward(in.train_actions);  // as the engine's stages (ZB-H1's ranks ≥ 1)
  in.local_micro_batches = plan.local_micro_batches;
  const int64_t mine = eval_batches > coords.dp ? (eval_batches - coords.dp + pc.dp - 1) / pc.dp : 0;
  if (mine > 0)
    for (const PipeAction& a : schedule_actions(pc.schedule, coords.pp, pc.pp, pc.virtual_stages, mine))
      if (a.forward) in.eval_actions.push_back(a);
  in.steps = c.train.steps;
  in.eval_every = c.train.eval_every;
  return in;
}

LedgerModelInput rank_ledger_input(const RunPlan& plan, const comm::ProcessGrid& grid, int rank, int64_t eval_batches) {
  const comm::RoleMap roles = plan.roles();
  if (!roles.is_server(rank)) return ledger_model_input(plan, grid.coords_of(rank), eval_batches);
  LedgerModelInput in;
  in.model = plan.config.model;
  in.ps_workers = roles.workers();
  const std::vector<model::UnitLayout> layouts = ps_unit_layouts(plan.config.model);
  std::vector<const model::UnitLayout*> units;
  for (const model::UnitLayout& u : layouts) units.push_back(&u);
  for (const PsPiece& p : PsKeySpace(units, roles).pieces(roles.server_index(rank)))
    in.ps_server_pieces.push_back({p.unit->id, p.size()});
  in.steps = plan.config.train.steps;
  in.eval_every = plan.config.train.eval_every;
  return in;
}

}  // namespace sp::plan
