#include "planner/evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

#include "comm/trace_record.h"
#include "evidence/bubble.h"
#include "kernels/reduce.h"
#include "model/precision.h"
#include "model/weights.h"
#include "planner/collective_time.h"
#include "planner/evaluate_after.h"
#include "planner/flops.h"

namespace sp::planner {
namespace {

using evaluate_detail::axis_of_group;
using evaluate_detail::evidence_times;
using evaluate_detail::group_size;
using evaluate_detail::optimizer_times;

Collective collective_of(const std::string& op) {
  if (op == "all_reduce") return Collective::kAllReduce;
  if (op == "reduce_scatter") return Collective::kReduceScatter;
  if (op == "all_gather") return Collective::kAllGather;
  if (op == "all_to_all") return Collective::kAllToAll;
  return Collective::kSendRecv;
}

// ops calls moving `bytes` in all: the α–β time is linear in S, so ops latencies plus one bandwidth term.
double priced_seconds(const std::string& op, int64_t ops, int64_t bytes, const GroupLink& link) {
  if (ops == 0 || op == "recv") return 0;  // a receive is the sender's transfer seen from the other end
  const Collective c = collective_of(op);
  const double latency = collective_seconds(c, 0, link);
  return static_cast<double>(ops) * latency + collective_seconds(c, static_cast<double>(bytes), link) - latency;
}

// The local canonical sum of a deterministic reduction (comm/deterministic.h: all-to-all, the sum of the n
// received chunks in rank order, all-gather) after each of its `ops` all-to-alls moving `bytes` in all: n − 1
// adds of a chunk (bytes / n), each reading two and writing one, at the measured `add` bandwidth (free
// without it, as every memory-bound kernel of a datasheet preset).
double local_sum_seconds(int64_t ops, int64_t bytes, int n, const DeviceRates& rates) {
  const auto add = rates.bandwidth.find(MemoryFamily::kAdd);
  if (ops == 0 || n < 2 || add == rates.bandwidth.end()) return 0;
  const double moved = 3.0 * (n - 1) * static_cast<double>(bytes) / n;
  return moved / add->second.at(moved / static_cast<double>(ops));
}

bool is_pass_phase(const std::string& phase) { return phase == "forward" || phase == "backward"; }

// Parameters of `units` on each tensor-parallel rank.
int64_t unit_params(const model::LlamaConfig& m, const std::vector<int>& units, int tp) {
  int64_t n = 0;
  for (int id : units) n += model::unit_numel(m, id, tp);
  return n;
}

struct ChunkTimes {
  KernelTimes forward, backward;  // one micro-batch
};

// One micro-batch through one chunk: the engine's kernels priced with the cluster's measured rates
// (kernel_costs.h), or, without them, the GEMM FLOPs (planner/flops.h) at the stated efficiency.
ChunkTimes chunk_times(const PlanQuery& q, const plan::RunPlan& plan, const plan::ChunkPlacement& ch, double peak) {
  const config::RunConfig& c = q.config;
  ChunkTimes t;
  if (!q.use_measured || q.cluster.measured.empty()) {
    const ModelShape shape = ModelShape::from_llama(c.model, c.name, "the run configuration");
    const ChunkFlops f = chunk_flops(shape, ch.layer_end - ch.layer_begin, ch.last, c.train.micro_batch_size,
                                     c.train.seq_len, c.parallel.tp, c.train.recompute);
    t.forward.gemm = f.forward / (peak * q.efficiency);
    t.backward.gemm = f.backward / (peak * q.efficiency);
    t.backward.wgrad = t.backward.gemm / 2;  // dW costs what dX does at one stated efficiency
    return t;
  }
  ChunkKernelsInput in;
  in.model = c.model;
  in.blocks = ch.layer_end - ch.layer_begin;
  in.first = ch.first;
  in.last = ch.last;
  in.micro_batch_size = c.train.micro_batch_size;
  in.seq_len = c.train.seq_len;
  in.tp = c.parallel.tp;
  in.recompute = c.train.recompute;
  in.mixed = c.train.precision.mixed();
  in.unit_params =
      unit_params(c.model, model::chunk_units(c.model, ch.layer_begin, ch.layer_end, ch.first, ch.last), c.parallel.tp);
  in.micro_batches = plan.local_micro_batches;
  const ChunkKernels k = chunk_kernels(in);
  t.forward = price_kernels(k.forward, q.cluster.measured, q.dtype, peak, q.efficiency);
  t.backward = price_kernels(k.backward, q.cluster.measured, q.dtype, peak, q.efficiency);
  return t;
}

// The plan placed on the cluster: its grid, the run plan and the link each group's collectives run on.
struct Placement {
  ClusterSpec placed;
  comm::ProcessGrid grid;
  plan::RunPlan plan;
  GroupLink tp_link, dp_link, pp_link, world_link;
};

Result<Placement> place_plan(const PlanQuery& q, PlanEvaluation& e) {
  const config::ParallelConfig& pc = q.config.parallel;
  ClusterSpec placed = q.cluster;
  placed.axis_order = pc.axis_order;
  SP_ASSIGN_OR_RETURN(comm::ProcessGrid grid, place_on_cluster(placed, pc.dp, pc.tp, pc.pp));
  SP_ASSIGN_OR_RETURN(plan::RunPlan plan, plan::RunPlan::make(q.config, grid.world_size()));
  plan.stream_bytes = static_cast<int64_t>(dtype_size(q.stream_dtype));
  SP_ASSIGN_OR_RETURN(const comm::ProcessGrid flat,
                      comm::ProcessGrid::create(grid.world_size(), 1, 1, "dp-tp-pp", grid.world_size()));
  const GroupLink tp_link = axis_link(placed, grid, comm::Axis::kTp, HopPattern::kRing);
  const GroupLink dp_link = axis_link(placed, grid, comm::Axis::kDp, HopPattern::kRing);
  const GroupLink pp_link = axis_link(placed, grid, comm::Axis::kPp, HopPattern::kChain);
  const GroupLink world_link = axis_link(placed, flat, comm::Axis::kDp, HopPattern::kRing);
  e.plan = plan;
  e.grid = grid.describe();
  e.links = {{"tp", tp_link}, {"dp", dp_link}, {"pp", pp_link}, {"world", world_link}};
  if (pc.tp > 1 && tp_link.crosses_nodes && pc.tp <= placed.devices_per_node)
    e.placement_warnings.push_back(fmt::format(
        "tp groups of {} ranks cross nodes ({}): every tensor-parallel all-reduce runs on {} at {:.4g} GB/s per hop "
        "instead of inside a node; a group of {} fits in one node of {} devices: {}",
        pc.tp, placed.rank_nodes.empty() ? "axis order " + pc.axis_order : "where the run's ranks ran", tp_link.link,
        tp_link.bandwidth_bytes_per_s / 1e9, pc.tp, placed.devices_per_node,
        placed.rank_nodes.empty() ? "put tp first (--axis-order tp-dp-pp)"
                                  : "give mpirun consecutive slots per host (--map-by slot) with tp first"));
  return Placement{.placed = std::move(placed),
                   .grid = std::move(grid),
                   .plan = std::move(plan),
                   .tp_link = tp_link,
                   .dp_link = dp_link,
                   .pp_link = pp_link,
                   .world_link = world_link};
}

// Per pp rank: the communication inside its forward and backward passes (seconds per step).
struct PassComm {
  std::vector<double> forward, backward;
  double pp_message_bytes = 0;  // one pipeline send, as the traffic model counts it (0 without pp)
};

// The ledger and the traffic of the evaluated ranks (every rank, or one per pipeline stage: dp 0, tp 0 — tp
// ranks hold equal shards, the rules require divisibility, and dp 0 holds the largest ZeRO shard,
// comm::even_split_counts), each rank's traffic priced on its links.
PassComm evaluate_ranks(const PlanQuery& q, const Placement& pl, PlanEvaluation& e) {
  const config::ParallelConfig& pc = q.config.parallel;
  const comm::ProcessGrid& grid = pl.grid;
  const std::map<std::string, const GroupLink*> link_of = {
      {"tp", &pl.tp_link}, {"dp", &pl.dp_link}, {"pp", &pl.pp_link}, {"world", &pl.world_link}};
  std::vector<int> ranks;
  if (q.all_ranks || grid.world_size() <= q.every_rank_up_to) {
    for (int r = 0; r < grid.world_size(); ++r) ranks.push_back(r);
  } else {
    for (int p = 0; p < pc.pp; ++p) ranks.push_back(grid.rank_of({.dp = 0, .tp = 0, .pp = p}));
  }
  PassComm pass{std::vector<double>(static_cast<size_t>(pc.pp), 0), std::vector<double>(static_cast<size_t>(pc.pp), 0)};
  std::map<std::tuple<std::string, std::string, std::string>, PricedTraffic> busiest;
  for (int r : ranks) {
    RankEvaluation re;
    re.rank = r;
    re.coords = grid.coords_of(r);
    plan::LedgerModelInput in = plan::ledger_model_input(pl.plan, re.coords, q.config.train.eval_batches);
    in.named = q.named_memory;
    re.memory = plan::predict_ledger(in);
    re.traffic = plan::predict_step_ops(pl.plan, grid, r, false, false);
    if (re.memory.total.peak > e.peak_bytes || e.ranks.empty()) {
      e.peak_bytes = re.memory.total.peak;
      e.largest_rank = r;
      size_t top = 0;
      for (size_t k = 1; k < kCategoryCount; ++k)
        if (re.memory.by_category[k].peak > re.memory.by_category[top].peak) top = k;
      e.largest_category = std::string(category_name(static_cast<Category>(top)));
    }
    double after = 0, fwd = 0, bwd = 0;
    for (const auto& [key, t] : re.traffic) {
      const auto& [group, phase, op] = key;
      const std::string axis = axis_of_group(group);
      const GroupLink& link = *link_of.at(axis == "ps" ? "world" : axis);
      double s = priced_seconds(op, t.ops, t.bytes, link);
      if (op == "all_to_all" && pc.reduction == config::Reduction::kDeterministic && q.use_measured)
        s += local_sum_seconds(t.ops, t.bytes, group_size(pc, axis), q.cluster.measured);
      PricedTraffic& b = busiest[{axis, phase, op}];
      if (t.bytes >= b.bytes) b = {axis, phase, op, t.ops, t.bytes, s, link.link};
      if (axis == "pp" && op == "send" && t.ops > 0)
        pass.pp_message_bytes = std::max(pass.pp_message_bytes, static_cast<double>(t.bytes) / t.ops);
      if (axis == "pp") continue;  // the pipeline simulation carries the transfers
      if (phase == "forward")
        fwd += s;
      else if (phase == "backward")
        bwd += s;
      else if (!is_pass_phase(phase))
        after += s;
    }
    const auto p = static_cast<size_t>(re.coords.pp);
    pass.forward[p] = std::max(pass.forward[p], fwd);
    pass.backward[p] = std::max(pass.backward[p], bwd);
    e.after_pipeline_seconds = std::max(e.after_pipeline_seconds, after);
    e.ranks.push_back(std::move(re));
  }
  for (auto& [key, t] : busiest) e.traffic.push_back(t);
  return pass;
}

// Compute: each chunk's forward and backward of one micro-batch, plus the rank's pass communication spread
// evenly over its passes, through the pipeline simulated over the engine's schedule; then the optimizer.
void price_pipeline(const PlanQuery& q, const Placement& pl, const PassComm& pass, double peak, PlanEvaluation& e) {
  const config::RunConfig& c = q.config;
  const config::ParallelConfig& pc = c.parallel;
  const plan::RunPlan& plan = pl.plan;
  const int v = pc.virtual_stages, chunks = plan.chunk_count();
  const auto passes = static_cast<double>(v * plan.local_micro_batches);
  PipelineTimes& pt = e.pipeline_times;
  pt.schedule = pc.schedule;
  pt.pp = pc.pp;
  pt.virtual_stages = v;
  pt.micro_batches = plan.local_micro_batches;
  e.measured_rates = q.use_measured && !q.cluster.measured.empty();
  std::vector<KernelTimes> compute(static_cast<size_t>(pc.pp));
  for (int ci = 0; ci < chunks; ++ci) {
    const plan::ChunkPlacement ch = plan.chunk(ci);
    const ChunkTimes t = chunk_times(q, plan, ch, peak);
    const auto p = static_cast<size_t>(ch.pp_rank);
    KernelTimes step = t.forward;
    step += t.backward;
    for (double* x : {&step.gemm, &step.attention, &step.memory}) *x *= static_cast<double>(plan.local_micro_batches);
    compute[p] += step;
    pt.forward_s.push_back(t.forward.total() + pass.forward[p] / passes);
    pt.backward_s.push_back(t.backward.total() + pass.backward[p] / passes);
    // ZB-H1's W: every linear's weight-gradient product, priced as such (kernel_costs.h); the attention's
    // backward, the memory-bound kernels and the pass's communication belong to B.
    pt.weight_s.push_back(t.backward.wgrad);
  }
  if (e.measured_rates)  // after the pipeline, the optimizer and the evidence on the busiest evaluated rank
    for (const RankEvaluation& r : e.ranks) {
      e.optimizer_seconds = std::max(e.optimizer_seconds, optimizer_times(q, plan, r.coords, peak).total());
      e.evidence_seconds = std::max(e.evidence_seconds, evidence_times(q, plan, r, peak).total());
    }
  // One pipeline message as the traffic model counts it (the boundary's rows × C at the stream's bytes).
  pt.transfer_s = pc.pp > 1 ? collective_seconds(Collective::kSendRecv, pass.pp_message_bytes, pl.pp_link) : 0;
  pt.record = q.pipeline_actions && pc.pp > 1;
  e.pipeline = simulate_pipeline(pt);
  e.closed_form_bubble = evidence::bubble_theory({.pp = pc.pp,
                                                  .schedule = config::schedule_name(pc.schedule),
                                                  .virtual_stages = v,
                                                  .micro_batches = plan.local_micro_batches});
  for (int p = 0; p < pc.pp; ++p) {
    const auto i = static_cast<size_t>(p);
    if (compute[i].total() > e.compute_seconds) {
      e.compute_seconds = compute[i].total();
      e.compute_split = compute[i];
    }
    e.pass_comm_seconds = std::max(e.pass_comm_seconds, pass.forward[i] + pass.backward[i]);
    e.pass_comm_by_pp_rank.push_back(pass.forward[i] + pass.backward[i]);
  }
  e.compute_by_pp_rank = compute;
  e.step_seconds = e.pipeline.makespan_s + e.after_pipeline_seconds + e.optimizer_seconds + e.evidence_seconds;
}

// The step's FLOPs and utilizations, the dominant communication (the (axis, phase) taking the most time on the
// busiest rank) and the assumptions the figures rest on.
void summarize_step(const PlanQuery& q, int world, double peak, PlanEvaluation& e) {
  const config::RunConfig& c = q.config;
  const ModelShape shape = ModelShape::from_llama(c.model, c.name, "the run configuration");
  const StepFlops flops = step_flops(shape, c.train.global_batch, c.train.seq_len, c.train.recompute);
  e.model_flops = flops.model;
  e.hardware_flops = flops.hardware;
  e.tokens_per_second = static_cast<double>(c.train.global_batch * c.train.seq_len) / e.step_seconds;
  e.mfu = utilization(flops.model, e.step_seconds, world, peak);
  e.hfu = utilization(flops.hardware, e.step_seconds, world, peak);
  std::map<std::pair<std::string, std::string>, std::pair<double, std::string>> parts;
  for (const PricedTraffic& t : e.traffic) {
    auto& part = parts[{t.axis, t.phase}];
    part.first += t.seconds;
    part.second = t.link;
  }
  double most = 0;
  for (const auto& [k, part] : parts)
    if (part.first > most) {
      most = part.first;
      e.dominant = fmt::format("{} {} on {}", k.first, k.second, part.second);
    }
  if (e.dominant.empty()) e.dominant = "none (no communication)";
  e.assumptions = evaluation_assumptions(q, e, peak);
}

}  // namespace

Result<PlanEvaluation> evaluate_plan(const PlanQuery& q) {
  if (!(q.efficiency > 0 && q.efficiency <= 1))
    return invalid_argument("efficiency {} is outside (0, 1]", q.efficiency)
        .with_hint("the fraction of the peak FLOP/s the GEMMs reach, e.g. --efficiency 0.5");
  SP_ASSIGN_OR_RETURN(const double peak, q.cluster.peak_flops_for(q.dtype));
  if (q.config.parallel.parameter_server())
    return invalid_argument("plan prices all-reduce strategies; a parameter-server run is not placed on a cluster")
        .with_hint("compare the parameter server with all-reduce on this host: shardproof compare (docs/ps.md)");
  PlanEvaluation e;
  SP_ASSIGN_OR_RETURN(const Placement placement, place_plan(q, e));
  const PassComm pass = evaluate_ranks(q, placement, e);
  // At most kMaxMemoryGib (cluster.h): exact in an int64, never the wrapped value of an oversized double.
  e.limit_bytes = static_cast<int64_t>(std::min(q.cluster.device_memory_bytes, kMaxMemoryGib * 1073741824.0));
  price_pipeline(q, placement, pass, peak, e);
  summarize_step(q, placement.grid.world_size(), peak, e);
  return e;
}

config::RunConfig run_config_around(const ModelShape& shape, const std::string& axis_order) {
  config::RunConfig c;
  c.name = shape.name;
  c.model = shape.llama_config();
  c.data.vocab_size = shape.vocab_size;  // the shape's own vocabulary, as a tokenizer would give it
  c.train.steps = 1;
  c.train.eval_batches = 0;
  c.train.eval_every = 0;
  c.train.micro_batch_size = 1;
  c.train.seq_len = std::min<int64_t>(shape.max_seq, 2048);
  c.train.global_batch = 0;
  c.parallel.reduction = config::Reduction::kFast;
  c.parallel.axis_order = axis_order;
  c.evidence.checksum_every = 0;
  return c;
}

namespace {
// The engine's configuration for a search strategy: `base` with the strategy applied (plan/strategy.h).
config::RunConfig config_for_strategy(const config::RunConfig& base, const plan::Strategy& s) {
  config::RunConfig c = base;
  plan::apply(s, c);
  return c;
}
}  // namespace

StrategyEvaluators engine_evaluators(const PlanQuery& base) {
  // memory() and time() of one strategy come from one evaluation, kept between the two calls.
  struct Cache {
    std::string name;
    std::optional<PlanEvaluation> e;
  };
  auto cache = std::make_shared<Cache>();
  auto evaluate = [base, cache](const plan::Strategy& s) -> const PlanEvaluation& {
    if (cache->name != plan::strategy_name(s) || !cache->e) {
      PlanQuery q = base;
      q.config = config_for_strategy(base.config, s);
      q.named_memory = false;
      q.pipeline_actions = false;
      q.all_ranks = false;
      q.every_rank_up_to = 0;
      auto e = evaluate_plan(q);
      SP_CHECK(e.ok(), "a strategy that passed the engine's rules could not be evaluated: {}", e.status().message());
      cache->name = plan::strategy_name(s);
      cache->e = std::move(*e);
    }
    return *cache->e;
  };
  StrategyEvaluators out;
  out.rules = [base](const plan::Strategy& s) {
    std::vector<Exclusion> why;
    for (plan::RuleViolation& v : plan::RunPlan::rule_violations(config_for_strategy(base.config, s), s.world()))
      why.push_back({v.kind == plan::RuleViolation::Kind::kDoesNotDivide ? ExclusionKind::kDoesNotDivide
                                                                         : ExclusionKind::kRefused,
                     std::move(v.message)});
    return why;
  };
  out.memory = [evaluate](const plan::Strategy& s) {
    const PlanEvaluation& e = evaluate(s);
    MemoryVerdict m;
    m.peak_bytes = e.peak_bytes;
    m.limit_bytes = e.limit_bytes;
    if (!e.fits()) m.over_category = e.largest_category;
    m.detail = {{"largest_rank", e.largest_rank}, {"largest_category", e.largest_category}};
    return m;
  };
  out.time = [evaluate](const plan::Strategy& s) {
    const PlanEvaluation& e = evaluate(s);
    return TimeVerdict{.step_seconds = e.step_seconds,
                       .detail = {{"tokens_per_second", e.tokens_per_second},
                                  {"mfu", e.mfu},
                                  {"hfu", e.hfu},
                                  {"bubble_fraction", e.pipeline.bubble_fraction},
                                  {"dominant", e.dominant}}};
  };
  return out;
}

}  // namespace sp::planner
