// A parallel strategy: how one training step is split over ranks — the grid (dp × tp × pp with ZeRO over dp, or
// the parameter server's workers and servers), the pipeline schedule with its virtual stages, activation
// recompute, sequence parallelism, the reduction order and the micro-batch size. Not a run configuration
// (config/run_config.h holds these fields among data, seeds and evidence): strategy_of reads them from one and
// apply writes them into one, the only two places that map the two, so the planner, compare, the labs, the
// judge's contract and the fault target see one type. One name grammar (docs/compare.md §Grammar), tokens joined
// by '-': "dp2-tp2-pp2-interleaved2-zero1-recompute-fast-sp-mb2", "ps-w4-s1".
// Invariant: parse_strategy(strategy_name(s)) == s; a field at its default is left out of the name.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "config/run_config.h"
#include "core/status.h"

namespace sp::plan {

struct Strategy {
  int dp = 1, tp = 1, pp = 1;  // under the parameter server dp is its workers
  int zero = 0;                // ZeRO stage over dp: 0 (plain DP), 1, 2, 3
  config::Schedule schedule = config::Schedule::k1F1B;
  int virtual_stages = 1;  // v > 1 only with the interleaved schedule
  model::Recompute recompute = model::Recompute::kNone;
  bool sequence_parallel = false;  // Megatron sequence parallelism (tp > 1)
  config::Reduction reduction = config::Reduction::kDeterministic;
  int servers = 0;               // > 0: the parameter server (docs/ps.md) with this many server ranks
  int64_t micro_batch_size = 1;  // B, sequences per micro-batch

  int workers() const { return dp * tp * pp; }
  int world() const { return workers() + servers; }
  bool operator==(const Strategy&) const = default;
};

// The strategy a run configuration describes (parallel.*, train.recompute, train.micro_batch_size).
Strategy strategy_of(const config::RunConfig& config);
// Writes `s` into `config`: the same fields strategy_of reads, nothing else (servers > 0 is
// parallel.architecture = "ps"). strategy_of(apply(s, c)) == s.
void apply(const Strategy& s, config::RunConfig& config);

// The same training on one device, the proof's reference (docs/prove.md): dp = tp = pp = 1, no ZeRO, 1F1B without
// virtual stages, no parameter server, no sequence parallelism; recompute, reduction and micro-batch size stay s's.
Strategy single_device(const Strategy& s);

// The canonical name: [ps-wW-sS | dpN] [tpN] [ppN] [zeroN] [gpipe | interleavedV | zbh1] [recompute | selective]
// [fast] [sp] [mbN], each only when it is not the default (dp always: "dp1" is the single device).
std::string strategy_name(const Strategy& s);
// Reads a name, tokens in any order, each kind at most once (docs/compare.md §Grammar). The grid (dp, tp, pp,
// zero, sp, the parameter server) is fixed by every name: an axis not named is 1. The schedule, recompute,
// reduction and micro-batch size are `base`'s unless named. Errors (kInvalidArgument, exit 2) name the bad
// token and list the valid ones; whether the strategy is valid for a model and world is RunPlan::make's job.
Result<Strategy> parse_strategy(std::string_view name, const Strategy& base = {});
// The strategy with its name and every field, as plan.json and `plan --search` write it (docs/plan.md §8).
nlohmann::json strategy_to_json(const Strategy& s);

// A strategy as a command's list names it: the label as written (compare's run directory) and what it names.
struct NamedStrategy {
  std::string label;
  Strategy strategy;
};
// "dp1,zero1-dp2" over `base` (parse_strategy; spaces around commas are ignored).
Result<std::vector<NamedStrategy>> parse_strategy_list(std::string_view list, const Strategy& base = {});
// The list with `reference` first (labelled as the list's first spelling of it, else "dp1"; added if missing) and
// repeated labels dropped: compare's order, every row against the first.
std::vector<NamedStrategy> with_reference_first(const std::vector<NamedStrategy>& list, const Strategy& reference);

// The --set overrides that make a child process's configuration `s` when its own sources give `base`: the
// grid always (parallel.dp/tp/pp/zero), every other field only where it differs from `base`. For a command
// that launches `train` (compare); in-process code calls apply. load(base sources + these) == apply(s, base).
std::vector<std::string> strategy_sets(const Strategy& s, const Strategy& base);

}  // namespace sp::plan
