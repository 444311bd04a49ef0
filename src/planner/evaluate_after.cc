#include "planner/evaluate_after.h"

#include "comm/trace_record.h"
#include "model/weights.h"

namespace sp::planner::evaluate_detail {

std::string axis_of_group(const std::string& group) { return group.substr(0, group.find('[')); }

// Members of a group on `axis` ("tp", "dp", "pp", or the world of a parameter-server run).
int group_size(const config::ParallelConfig& pc, const std::string& axis) {
  return axis == "tp" ? pc.tp : axis == "dp" ? pc.dp : axis == "pp" ? pc.pp : pc.world();
}

namespace {

// The parameters the rank at `coords` holds (every chunk of its stage), those it owns (a 1/dp shard under
// ZeRO, dp rank 0's being the largest) and its dp range of every unit (what the evidence summarizes: over the
// world every element once, parallel/update_strategy.h).
struct RankParams {
  int64_t local = 0, owned = 0, dp_range = 0;
};
RankParams rank_params(const config::RunConfig& c, const plan::RunPlan& plan, const comm::Coords& coords) {
  RankParams p;
  for (int ci = 0; ci < plan.chunk_count(); ++ci) {
    const plan::ChunkPlacement ch = plan.chunk(ci);
    if (ch.pp_rank != coords.pp) continue;
    for (int id : model::chunk_units(c.model, ch.layer_begin, ch.layer_end, ch.first, ch.last)) {
      const int64_t n = model::unit_numel(c.model, id, c.parallel.tp);
      const int64_t shard = (n + c.parallel.dp - 1) / c.parallel.dp;
      p.local += n;
      p.owned += c.parallel.zero == 0 ? n : shard;
      p.dp_range += shard;
    }
  }
  return p;
}

// The share of steps that write checksum records (evidence.checksum_every; 0: none).
double checksum_share(const config::RunConfig& c) {
  return c.evidence.checksum_every > 0 ? 1.0 / static_cast<double>(c.evidence.checksum_every) : 0;
}

}  // namespace

KernelTimes optimizer_times(const PlanQuery& q, const plan::RunPlan& plan, const comm::Coords& coords, double peak) {
  const RankParams p = rank_params(q.config, plan, coords);
  return price_kernels(
      optimizer_kernels(p.local, p.owned, p.dp_range, checksum_share(q.config), q.config.train.precision.mixed()),
      q.cluster.measured, q.dtype, peak, q.efficiency);
}

KernelTimes evidence_times(const PlanQuery& q, const plan::RunPlan& plan, const RankEvaluation& r, double peak) {
  const config::RunConfig& c = q.config;
  const config::ParallelConfig& pc = c.parallel;
  const RankParams p = rank_params(c, plan, r.coords);
  EvidenceKernelsInput in;
  in.summarized_params = p.dp_range;
  in.checksum_share = checksum_share(c);
  const double element = c.train.precision.mixed() ? 2 : 4;  // the working copy ParamStore holds
  if (pc.dp > 1 && pc.zero < 3) in.replica_bytes = element * static_cast<double>(p.local);
  if (c.evidence.trace)
    for (const auto& [key, t] : r.traffic) {
      const auto& [group, phase, op] = key;
      const auto kind = comm::op_kind_from_name(op);
      if (!kind || t.ops == 0) continue;
      in.digested_bytes +=
          static_cast<double>(comm::digested_bytes_of(*kind, t.bytes, group_size(pc, axis_of_group(group))));
    }
  return price_kernels(evidence_kernels(in), q.cluster.measured, q.dtype, peak, q.efficiency);
}

}  // namespace sp::planner::evaluate_detail
