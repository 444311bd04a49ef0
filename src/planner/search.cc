#include "planner/search.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace sp::planner {
namespace {

std::vector<int> divisors(int n) {
  std::vector<int> d;
  for (int i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

Status check_space(const SearchSpace& s, const StrategyEvaluators& e) {
  std::vector<std::string> errs;
  if (s.world < 1) errs.push_back(fmt::format("world = {} devices must be ≥ 1", s.world));
  if (s.global_batch < 1) errs.push_back(fmt::format("global batch = {} sequences must be ≥ 1", s.global_batch));
  if (s.micro_batch_sizes.empty()) errs.push_back("no micro-batch sizes to try");
  for (int64_t b : s.micro_batch_sizes)
    if (b < 1) errs.push_back(fmt::format("micro-batch size {} must be ≥ 1", b));
  if (s.schedules.empty()) errs.push_back("no pipeline schedules to try");
  if (s.zero_stages.empty()) errs.push_back("no ZeRO stages to try");
  for (int z : s.zero_stages)
    if (z < 0 || z > 3) errs.push_back(fmt::format("ZeRO stage {} is not one of 0, 1, 2, 3", z));
  if (s.recompute.empty()) errs.push_back("no recompute modes to try");
  if (s.max_virtual_stages < 1) errs.push_back(fmt::format("max virtual stages {} must be ≥ 1", s.max_virtual_stages));
  if (!e.memory || !e.time) errs.push_back("the search needs a memory and a time evaluator");
  if (errs.empty()) return Status();
  std::string msg = "invalid search space:";
  for (const auto& x : errs) msg += "\n  - " + x;
  return Status(StatusCode::kInvalidArgument, msg);
}

}  // namespace

std::string exclusion_kind_name(ExclusionKind kind) {
  switch (kind) {
    case ExclusionKind::kDoesNotDivide:
      return "does_not_divide";
    case ExclusionKind::kRefused:
      return "refused";
    case ExclusionKind::kDoesNotFit:
      return "does_not_fit";
  }
  return "?";
}

SearchSpace engine_search_space(int world, int64_t global_batch, config::Reduction reduction) {
  SearchSpace space;
  space.world = world;
  space.global_batch = global_batch;
  space.sequence_parallel = true;
  space.reduction = reduction;
  return space;
}

std::vector<plan::Strategy> enumerate_strategies(const SearchSpace& space) {
  std::vector<plan::Strategy> out;
  if (space.world < 1) return out;
  for (int tp : divisors(space.world))
    for (int pp : divisors(space.world / tp)) {
      std::vector<std::pair<config::Schedule, int>> pipes;  // (schedule, v)
      if (pp == 1) {
        pipes.push_back({config::Schedule::k1F1B, 1});
      } else {
        for (config::Schedule s : space.schedules) {
          if (s != config::Schedule::kInterleaved)
            pipes.push_back({s, 1});
          else
            for (int v = 2; v <= space.max_virtual_stages; ++v) pipes.push_back({s, v});
        }
      }
      for (const auto& [schedule, v] : pipes)
        for (int zero : space.zero_stages)
          for (model::Recompute rc : space.recompute)
            for (int64_t b : space.micro_batch_sizes) {
              plan::Strategy s;
              s.reduction = space.reduction;
              s.tp = tp;
              s.pp = pp;
              s.dp = space.world / (tp * pp);
              s.schedule = schedule;
              s.virtual_stages = v;
              s.zero = zero;
              s.recompute = rc;
              s.micro_batch_size = b;
              out.push_back(s);
              if (space.sequence_parallel && tp > 1) {
                s.sequence_parallel = true;
                out.push_back(s);
              }
            }
    }
  return out;
}

std::vector<Exclusion> shape_rules(const ModelShape& m, const SearchSpace& space, const plan::Strategy& s) {
  std::vector<Exclusion> out;
  auto divide = [&](std::string rule) { out.push_back({ExclusionKind::kDoesNotDivide, std::move(rule)}); };
  auto refuse = [&](std::string rule) { out.push_back({ExclusionKind::kRefused, std::move(rule)}); };
  if (m.n_heads % s.tp != 0) divide(fmt::format("n_heads {} is not divisible by tp {}", m.n_heads, s.tp));
  if (m.n_kv_heads % s.tp != 0) divide(fmt::format("n_kv_heads {} is not divisible by tp {}", m.n_kv_heads, s.tp));
  if (m.ffn_dim % s.tp != 0) divide(fmt::format("ffn_dim {} is not divisible by tp {}", m.ffn_dim, s.tp));
  const int64_t chunks = int64_t{s.pp} * s.virtual_stages;
  if (m.n_layers % chunks != 0)
    divide(fmt::format("n_layers {} is not divisible by pp × v = {} × {} = {}", m.n_layers, s.pp, s.virtual_stages,
                       chunks));
  const int64_t per_step = s.micro_batch_size * s.dp;
  if (space.global_batch % per_step != 0)
    divide(fmt::format("global batch {} is not divisible by micro_batch_size × dp = {} × {} = {}", space.global_batch,
                       s.micro_batch_size, s.dp, per_step));
  else if (s.schedule == config::Schedule::kInterleaved && (space.global_batch / per_step) % s.pp != 0)
    divide(
        fmt::format("interleaved 1F1B needs the micro-batches per pipeline, global batch / (micro_batch_size × "
                    "dp) = {}, to be a multiple of pp = {} (Megatron-LM's rule)",
                    space.global_batch / per_step, s.pp));
  if (s.zero >= 2 && s.pp > 1)
    refuse(
        fmt::format("ZeRO-{} with pp = {} is refused (as DeepSpeed does): it would reduce-scatter gradients or "
                    "re-gather parameters for every micro-batch of the pipeline",
                    s.zero, s.pp));
  if (s.zero >= 1 && s.dp == 1)
    refuse(fmt::format("ZeRO-{} with dp = 1 has nothing to shard over; it is the zero = 0 strategy", s.zero));
  return out;
}

Result<SearchResult> search_strategies(const ModelShape& m, const SearchSpace& space, const StrategyEvaluators& e,
                                       const SearchProgress& progress) {
  SP_RETURN_IF_ERROR(check_space(space, e));
  SP_RETURN_IF_ERROR(m.validate());
  SearchResult r;
  std::vector<size_t> order;  // enumeration index of each ranked strategy
  const std::vector<plan::Strategy> all = enumerate_strategies(space);
  r.enumerated = static_cast<int64_t>(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    if (progress) progress(static_cast<int64_t>(i), r.enumerated);
    const plan::Strategy& s = all[i];
    std::vector<Exclusion> why = shape_rules(m, space, s);
    if (e.rules && why.empty()) {  // the system's own rules, once the general ones pass (no repeats)
      std::vector<Exclusion> more = e.rules(s);
      why.insert(why.end(), more.begin(), more.end());
    }
    if (!why.empty()) {
      r.excluded.push_back({s, std::move(why)});
      continue;
    }
    MemoryVerdict mem = e.memory(s);
    if (!mem.fits()) {
      const std::string rule = fmt::format(
          "peak {:.2f} GiB per rank exceeds the device's {:.2f} GiB; {} crosses the "
          "limit",
          mem.peak_bytes / 1073741824.0, mem.limit_bytes / 1073741824.0, mem.over_category);
      r.excluded.push_back({s, {{ExclusionKind::kDoesNotFit, rule}}});
      continue;
    }
    r.ranked.push_back({s, std::move(mem), e.time(s)});
    order.push_back(i);
  }
  std::vector<size_t> idx(r.ranked.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const auto& x = r.ranked[a];
    const auto& y = r.ranked[b];
    if (x.time.step_seconds != y.time.step_seconds) return x.time.step_seconds < y.time.step_seconds;
    if (x.memory.peak_bytes != y.memory.peak_bytes) return x.memory.peak_bytes < y.memory.peak_bytes;
    return order[a] < order[b];
  });
  std::vector<RankedStrategy> sorted;
  sorted.reserve(idx.size());
  for (size_t i : idx) sorted.push_back(std::move(r.ranked[i]));
  r.ranked = std::move(sorted);
  return r;
}

nlohmann::json search_result_to_json(const SearchResult& r) {
  nlohmann::json ranked = nlohmann::json::array(), excluded = nlohmann::json::array();
  std::map<std::string, int64_t> by_kind = {{"does_not_divide", 0}, {"refused", 0}, {"does_not_fit", 0}};
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const auto& x = r.ranked[i];
    ranked.push_back(
        {{"rank", i + 1},
         {"strategy", plan::strategy_to_json(x.strategy)},
         {"memory",
          {{"peak_bytes", x.memory.peak_bytes}, {"limit_bytes", x.memory.limit_bytes}, {"detail", x.memory.detail}}},
         {"time", {{"step_seconds", x.time.step_seconds}, {"detail", x.time.detail}}}});
  }
  for (const auto& x : r.excluded) {
    nlohmann::json reasons = nlohmann::json::array();
    for (const auto& w : x.reasons) reasons.push_back({{"kind", exclusion_kind_name(w.kind)}, {"rule", w.rule}});
    const std::string kind = exclusion_kind_name(x.reasons.front().kind);
    ++by_kind[kind];
    excluded.push_back({{"strategy", plan::strategy_to_json(x.strategy)}, {"kind", kind}, {"reasons", reasons}});
  }
  return {{"enumerated", r.enumerated}, {"ranked", ranked}, {"excluded", excluded}, {"excluded_by_kind", by_kind}};
}

nlohmann::json excluded_by_rule(const nlohmann::json& excluded) {
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, std::string>> rules;
  // Strategies, not reasons: a strategy with several reasons under one rule counts once for it (issue 33: the
  // counts did not add up to the kinds').
  for (const auto& x : excluded) {
    std::set<std::pair<std::string, std::string>> seen;
    for (const auto& w : x["reasons"]) {
      const std::string rule = w["rule"].get<std::string>();
      const std::pair<std::string, std::string> key = {w["kind"].get<std::string>(),
                                                       rule.substr(0, rule.find_first_of("0123456789"))};
      if (!seen.insert(key).second) continue;
      auto& [n, example] = rules[key];
      if (n++ == 0) example = x["strategy"]["name"].get<std::string>() + ": " + rule;
    }
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, v] : rules)
    out.push_back({{"kind", key.first}, {"rule", key.second}, {"count", v.first}, {"example", v.second}});
  return out;
}

}  // namespace sp::planner
