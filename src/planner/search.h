// Strategy search: enumerates every (dp, tp, pp, v, schedule, ZeRO, recompute, micro-batch) for a model
// on a number of devices and a global batch, says why each excluded one is excluded, and ranks the rest
// by step time. It is a pure function of its inputs: memory and time come from evaluators passed in, so
// the engine's own ledger and traffic models (phase 2) plug in without this file knowing them, and tests
// plug in closed forms.
// Order of judgement, per strategy: the shape rules below, then (when they all pass) the caller's extra rules (every
// violated rule is listed), then memory (evaluated only when no rule failed), then time (only when it fits). Invariant:
// enumerated == ranked + excluded, each strategy appears once, and the output order is a function of the inputs alone
// (ranked: step time, then peak memory, then enumeration order). Reference: docs/plan.md §search (the JSON schema and
// the rules with their sources).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "plan/strategy.h"
#include "planner/model_shape.h"

namespace sp::planner {

struct SearchSpace {
  int world = 1;             // devices, one rank each
  int64_t global_batch = 1;  // sequences per step
  std::vector<int64_t> micro_batch_sizes = {1, 2, 4, 8};
  std::vector<config::Schedule> schedules = {config::Schedule::kGpipe, config::Schedule::k1F1B,
                                             config::Schedule::kInterleaved, config::Schedule::kZbH1};
  std::vector<int> zero_stages = {0, 1, 2, 3};
  std::vector<model::Recompute> recompute = {model::Recompute::kNone, model::Recompute::kSelective,
                                             model::Recompute::kFull};
  int max_virtual_stages = 4;      // interleaved: v ∈ [2, max_virtual_stages]
  bool sequence_parallel = false;  // also try every tp > 1 strategy with sequence parallelism
  // What the search does not vary: the reduction of every strategy, as the base configuration has it
  // (plan::strategy_of; the planner's engine defaults reduce fast, planner/evaluate.h run_config_around).
  config::Reduction reduction = config::Reduction::kFast;
};

enum class ExclusionKind { kDoesNotDivide, kRefused, kDoesNotFit };
std::string exclusion_kind_name(ExclusionKind kind);  // "does_not_divide", "refused", "does_not_fit"

struct Exclusion {
  ExclusionKind kind = ExclusionKind::kRefused;
  std::string rule;  // the violated rule with its numbers: "n_heads 52 is not divisible by tp 8"
};

struct MemoryVerdict {
  int64_t peak_bytes = 0;     // the largest rank's peak
  int64_t limit_bytes = 0;    // the device's memory
  std::string over_category;  // empty when it fits; else the category that crosses the limit ("activation")
  nlohmann::json detail = nlohmann::json::object();  // the evaluator's breakdown, passed through to the JSON
  bool fits() const { return over_category.empty(); }
};

struct TimeVerdict {
  double step_seconds = 0;
  nlohmann::json detail = nlohmann::json::object();
};

struct StrategyEvaluators {
  // Extra rules of the system being planned (phase 2: the engine's plan::RunPlan::make); may be empty.
  std::function<std::vector<Exclusion>(const plan::Strategy&)> rules;
  std::function<MemoryVerdict(const plan::Strategy&)> memory;  // required
  std::function<TimeVerdict(const plan::Strategy&)> time;      // required
};

struct RankedStrategy {
  plan::Strategy strategy;
  MemoryVerdict memory;
  TimeVerdict time;
};
struct ExcludedStrategy {
  plan::Strategy strategy;
  std::vector<Exclusion> reasons;  // the first decides the kind reported in summaries
};
struct SearchResult {
  int64_t enumerated = 0;
  std::vector<RankedStrategy> ranked;      // fastest first
  std::vector<ExcludedStrategy> excluded;  // in enumeration order
};

// The whole cross product in canonical order: tp ascending over the divisors of world, pp ascending over
// the divisors of world / tp, dp = world / (tp·pp); at pp = 1 only 1F1B with v = 1 (every schedule is the
// same there); then the schedule list (interleaved once per v ∈ [2, max_virtual_stages]), ZeRO stages,
// recompute modes and micro-batch sizes in the order given.
// The space `plan --search` searches: every ZeRO stage, recompute mode, schedule and micro-batch size of the
// defaults, and sequence parallelism too (the engine runs it: priced by its ledger and traffic models), at
// `reduction` (the base configuration's).
SearchSpace engine_search_space(int world, int64_t global_batch, config::Reduction reduction);
std::vector<plan::Strategy> enumerate_strategies(const SearchSpace& space);

// The general rules of Megatron-style 3D parallelism (each with its source in docs/plan.md): head, KV-head
// and FFN divisibility by tp; layers by pp·v; the global batch by micro-batch·dp; interleaving needs the
// micro-batches per pipeline to be a multiple of pp; ZeRO-2/3 with pp > 1 and ZeRO ≥ 1 with dp = 1 refused.
std::vector<Exclusion> shape_rules(const ModelShape& model, const SearchSpace& space, const plan::Strategy& s);

// kInvalidArgument for an unusable space (world or batch < 1, an empty list, a ZeRO stage outside 0..3,
// a micro-batch < 1) or missing evaluators. `progress` (optional) is called after every strategy judged
// with (judged, enumerated), so a caller can show a long search advancing (the CLI prints a line every
// few seconds); it changes nothing in the result.
using SearchProgress = std::function<void(int64_t judged, int64_t enumerated)>;
Result<SearchResult> search_strategies(const ModelShape& model, const SearchSpace& space,
                                       const StrategyEvaluators& evaluators, const SearchProgress& progress = {});

// {"enumerated", "ranked": [{"rank", "strategy", "memory", "time"}], "excluded": [{"strategy", "kind",
//  "reasons": [{"kind", "rule"}]}], "excluded_by_kind": {kind: count}} (docs/plan.md).
nlohmann::json search_result_to_json(const SearchResult& result);

// The "excluded" list of that document grouped by kind and rule (a rule's text up to its first digit, so
// "n_heads 52 is not divisible by tp 8" and "... by tp 16" are one rule): [{"kind", "rule", "count",
// "example"}] in (kind, rule) order, the example being the first strategy's name and its whole rule; "count"
// counts strategies, each once per rule however many of its reasons share the rule.
nlohmann::json excluded_by_rule(const nlohmann::json& excluded);

}  // namespace sp::planner
