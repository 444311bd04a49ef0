#include "parallel/memory_fit.h"

#include <fmt/format.h>

#include <vector>

#include "comm/agree.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/machine.h"
#include "parallel/parameter_server.h"
#include "parallel/schedule.h"

namespace sp::parallel {
namespace {

std::string gib(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

}  // namespace

evidence::LedgerModelInput ledger_model_input(const Plan& plan, const comm::Coords& coords, int64_t eval_batches) {
  const RunConfig& c = plan.config;
  const ParallelConfig& pc = c.parallel;
  evidence::LedgerModelInput in;
  in.model = c.model;
  in.dp = pc.parameter_server() ? 1 : pc.dp;  // a worker's dp axis is itself: no staging, no shards
  in.owns_optimizer = !pc.parameter_server();
  in.tp = pc.tp;
  in.pp = pc.pp;
  in.dp_rank = coords.dp;
  in.tp_rank = coords.tp;
  in.zero = pc.zero;
  in.deterministic = pc.reduction == Reduction::kDeterministic;
  in.micro_batch_size = c.train.micro_batch_size;
  in.seq_len = c.train.seq_len;
  in.recompute = c.train.recompute;
  in.param_bytes = static_cast<int64_t>(dtype_size(c.train.precision.compute));
  in.grad_bytes = static_cast<int64_t>(dtype_size(c.train.precision.grad));
  in.gemm16 = plan.gemm16;
  for (const ChunkPlacement& p : plan.chunks_of(coords.pp))
    in.chunks.push_back({p.layer_begin, p.layer_end, p.first, p.last});
  for (const PipeAction& a :
       schedule_actions(pc.schedule, coords.pp, pc.pp, pc.virtual_stages, plan.local_micro_batches))
    in.train_actions.push_back({a.forward, a.virtual_stage, a.micro_batch});
  in.local_micro_batches = plan.local_micro_batches;
  const int64_t mine = eval_batches > coords.dp ? (eval_batches - coords.dp + pc.dp - 1) / pc.dp : 0;
  if (mine > 0)
    for (const PipeAction& a : schedule_actions(pc.schedule, coords.pp, pc.pp, pc.virtual_stages, mine))
      if (a.forward) in.eval_actions.push_back({a.forward, a.virtual_stage, a.micro_batch});
  in.steps = c.train.steps;
  in.eval_every = c.train.eval_every;
  return in;
}

evidence::LedgerModelInput rank_ledger_input(const Plan& plan, const comm::ProcessGrid& grid, int rank,
                                             int64_t eval_batches) {
  const comm::RoleMap roles = plan.roles();
  if (!roles.is_server(rank)) return ledger_model_input(plan, grid.coords_of(rank), eval_batches);
  evidence::LedgerModelInput in;
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

Status check_memory_fit(const Plan& plan, const comm::ProcessGrid& grid, comm::Communicator& world) {
  const int n = world.size(), rank = world.rank();
  const int64_t peak =
      evidence::predict_ledger(rank_ledger_input(plan, grid, rank, plan.config.train.eval_batches)).total.peak;
  const std::string host = host_name();
  const int64_t mine[2] = {static_cast<int64_t>(xxh3_64(host)), peak};
  std::vector<int64_t> all(2 * static_cast<size_t>(n));
  world.all_gather(mine, all.data(), std::vector<int64_t>(static_cast<size_t>(n), 2), DType::kI64);
  int64_t sum = 0;
  std::vector<int> on_host;
  for (int r = 0; r < n; ++r)
    if (all[2 * static_cast<size_t>(r)] == mine[0]) {
      sum += all[2 * static_cast<size_t>(r) + 1];
      on_host.push_back(r);
    }
  Status st;
  const Result<int64_t> available = available_memory_bytes();
  if (!available.ok()) {
    if (on_host.front() == rank)
      log_warn("cannot check the predicted memory against host '{}': {}", host, available.status().message());
  } else if (sum > *available) {
    st = invalid_argument(
             "the model does not fit in memory: the memory ledger predicts a peak of {} ({} bytes) for the {} on host "
             "'{}' (world rank{} {}), but only {} ({} bytes) are available there (MemAvailable, /proc/meminfo)",
             gib(sum), sum, on_host.size() == 1 ? "rank" : fmt::format("{} ranks", on_host.size()), host,
             on_host.size() == 1 ? "" : "s", fmt::join(on_host, ", "), gib(*available), *available)
             .with_hint(
                 "a smaller model, micro-batch or seq_len, train.recompute = \"full\", more ranks per model "
                 "(parallel.zero = 3, tp or pp), or more hosts");
  }
  return comm::agree(world, st);
}

}  // namespace sp::parallel
