// plan_evaluation_to_json: the document `shardproof plan --json` prints (docs/plan.md §8); the text
// report and the HTML report's plan view are views of it.
#include <fmt/format.h>

#include <algorithm>

#include "planner/evaluate.h"

namespace sp::planner {

namespace {
using nlohmann::json;

// The strategy the plan evaluated, with its name as `plan --search` ranks it.
json strategy_json(const config::RunConfig& c) {
  json strategy = plan::strategy_to_json(plan::strategy_of(c));
  strategy["axis_order"] = c.parallel.axis_order;
  return strategy;
}

// Every evaluated rank: its coordinates, peak memory per category and traffic per group and phase.
json ranks_json(const PlanEvaluation& e) {
  json ranks = json::array();
  for (const RankEvaluation& r : e.ranks) {
    json cats = json::object();
    for (size_t k = 0; k < kCategoryCount; ++k)
      cats[std::string(category_name(static_cast<Category>(k)))] = r.memory.by_category[k].peak;
    json traffic = json::object();
    for (const auto& [key, t] : r.traffic) {
      const auto& [group, phase, op] = key;
      json& cell = traffic[group][phase];
      if (cell.is_null()) cell = {{"ops", 0}, {"bytes", 0}, {"by_op", json::object()}};
      cell["ops"] = cell["ops"].get<int64_t>() + t.ops;
      cell["bytes"] = cell["bytes"].get<int64_t>() + t.bytes;
      cell["by_op"][op] = {{"ops", t.ops}, {"bytes", t.bytes}};
    }
    ranks.push_back({{"rank", r.rank},
                     {"coords", fmt::format("dp{}.tp{}.pp{}", r.coords.dp, r.coords.tp, r.coords.pp)},
                     {"peak_bytes", r.memory.total.peak},
                     {"by_category", cats},
                     {"traffic", traffic}});
  }
  return ranks;
}

// The simulated pipeline: each chunk's pass times and the first kMaxPipelineActions intervals,
// [rank, virtual stage, micro-batch, "forward" | "backward", start s, end s] (the report draws them as a
// Gantt chart), with how many were left out.
json pipeline_json(const PlanEvaluation& e, int pp) {
  json stages = json::array();
  for (size_t i = 0; i < e.pipeline_times.forward_s.size(); ++i)
    stages.push_back({{"chunk", i},
                      {"pp_rank", static_cast<int>(i) % pp},
                      {"forward", e.pipeline_times.forward_s[i]},
                      {"backward", e.pipeline_times.backward_s[i]}});
  // The simulated pipeline's intervals, [rank, virtual stage, micro-batch, "forward" | "backward", start s,
  // end s], the first kMaxPipelineActions of them (the report draws them as a Gantt chart).
  constexpr size_t kMaxPipelineActions = 10000;
  json actions = json::array();
  for (size_t i = 0; i < std::min(e.pipeline.actions.size(), kMaxPipelineActions); ++i) {
    const SimulatedAction& a = e.pipeline.actions[i];
    actions.push_back({a.rank, a.virtual_stage, a.micro_batch,
                       a.forward ? "forward" : (a.weight ? "backward_weight" : "backward"), a.start_s, a.end_s});
  }
  const size_t omitted = e.pipeline.actions.size() - actions.size();
  return {{"stages", stages}, {"actions", actions}, {"omitted", omitted}};
}

// Per pp rank: its compute by kind and its pass communication, seconds per step (every micro-batch).
nlohmann::json by_pp_rank(const PlanEvaluation& e) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t p = 0; p < e.compute_by_pp_rank.size(); ++p) {
    const KernelTimes& k = e.compute_by_pp_rank[p];
    out.push_back({{"gemm_seconds", k.gemm},
                   {"attention_seconds", k.attention},
                   {"memory_seconds", k.memory},
                   {"pass_comm_seconds", p < e.pass_comm_by_pp_rank.size() ? e.pass_comm_by_pp_rank[p] : 0.0}});
  }
  return out;
}

}  // namespace

nlohmann::json plan_evaluation_to_json(const PlanQuery& q, const PlanEvaluation& e) {
  const config::RunConfig& c = q.config;
  const config::ParallelConfig& pc = c.parallel;
  const json pipeline = pipeline_json(e, pc.pp);
  json links = json::object();
  for (const auto& [axis, l] : e.links) links[axis] = l.to_json();
  json priced = json::array();
  for (const PricedTraffic& t : e.traffic)
    priced.push_back({{"axis", t.axis},
                      {"phase", t.phase},
                      {"op", t.op},
                      {"ops", t.ops},
                      {"bytes", t.bytes},
                      {"seconds", t.seconds},
                      {"link", t.link}});
  return {{"format_version", 1},
          {"kind", "plan"},
          {"inputs",
           {{"cluster", q.cluster.to_json()},
            {"model", ModelShape::from_llama(c.model, c.name, "the run configuration").to_json()},
            {"strategy", strategy_json(c)},
            {"global_batch", c.train.global_batch},
            {"seq_len", c.train.seq_len},
            {"eval_batches", c.train.eval_batches},
            {"dtype", q.dtype},
            {"efficiency", q.efficiency},
            {"compute_rates", e.measured_rates ? "measured" : "stated efficiency"},
            {"activation_model", "engine"}}},
          {"placement",
           {{"grid", e.grid},
            {"links", links},
            {"warnings", e.placement_warnings},
            {"ranks_on", q.cluster.rank_nodes.empty() ? "slots" : "recorded hosts"}}},
          {"memory",
           {{"limit_bytes", e.limit_bytes},
            {"fits", e.fits()},
            {"peak_bytes", e.peak_bytes},
            {"largest_rank", e.largest_rank},
            {"largest_category", e.largest_category},
            {"ranks", ranks_json(e)}}},
          {"traffic", priced},
          {"compute",
           {{"model_flops", e.model_flops},
            {"hardware_flops", e.hardware_flops},
            {"chunk_seconds", pipeline["stages"]},
            {"measured_rates", e.measured_rates},
            {"gemm_seconds", e.compute_split.gemm},
            {"attention_seconds", e.compute_split.attention},
            {"memory_seconds", e.compute_split.memory},
            {"by_pp_rank", by_pp_rank(e)}}},
          {"pipeline",
           {{"schedule", config::schedule_name(pc.schedule)},
            {"transfer_seconds", e.pipeline_times.transfer_s},
            {"simulated_seconds", e.pipeline.makespan_s},
            {"bubble_fraction", e.pipeline.bubble_fraction},
            {"closed_form_bubble_fraction", e.closed_form_bubble},
            {"micro_batches", e.pipeline_times.micro_batches},
            {"virtual_stages", e.pipeline_times.virtual_stages},
            {"busy_seconds", e.pipeline.busy_s},
            {"actions", pipeline["actions"]},
            {"actions_omitted", pipeline["omitted"]}}},
          {"step",
           {{"seconds", e.step_seconds},
            {"compute_seconds", e.compute_seconds},
            {"pass_comm_seconds", e.pass_comm_seconds},
            {"after_pipeline_seconds", e.after_pipeline_seconds},
            {"optimizer_seconds", e.optimizer_seconds},
            {"evidence_seconds", e.evidence_seconds},
            {"tokens_per_second", e.tokens_per_second},
            {"mfu", e.mfu},
            {"hfu", e.hfu},
            {"dominant_comm", e.dominant}}},
          {"assumptions", e.assumptions}};
}

}  // namespace sp::planner
