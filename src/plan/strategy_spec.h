// Strategy specs for `shardproof compare --strategies LIST` (docs/compare.md §"Grammar").
// LIST is comma-separated; a spec is tokens joined by '-', each token at most once:
//   dpN tpN ppN (N ≥ 1)   zeroN (N ∈ 0..3)   gpipe | 1f1b | interleaved[V] (V ≥ 2, default 2)
//   recompute (train.recompute = full) | selective (train.recompute = selective)   fast (parallel.reduction = fast)
//   sp (parallel.sequence_parallel = true; with tpN, N ≥ 2)
//   ps wN sN: the parameter server (docs/ps.md) with N workers (= dp) and N servers: "ps-w4-s1"
// An axis not named is 1 and zero is 0, so every spec fixes the whole grid; the schedule, recompute
// and reduction are the base config's unless named. This parses text only: whether the strategy is
// valid for a model and world is RunPlan::make's job (a rejected spec becomes an error row).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace sp::plan {

struct StrategySpec {
  std::string label;  // the spec as written, e.g. "dp2-tp2-pp2"; also the run's directory name
  int dp = 1, tp = 1, pp = 1, zero = 0;
  std::string schedule;    // empty: the base config's
  int virtual_stages = 0;  // 0: the base config's (set with the schedule token)
  std::string recompute;   // empty: the base config's; "full" or "selective"
  bool fast = false;
  bool sequence_parallel = false;
  int servers = 0;  // > 0: parallel.architecture = "ps" with this many servers
  int world() const { return dp * tp * pp + servers; }
  // The --set overrides that turn the base config into this strategy.
  std::vector<std::string> overrides() const;
  bool is_reference() const;  // dp1 alone: the single-device run every other row is compared with
};

// "dp1,zero1-dp2": errors (exit 2) name the bad token and list the valid ones.
Result<std::vector<StrategySpec>> parse_strategy_list(const std::string& list);
Result<StrategySpec> parse_strategy(const std::string& spec);
// The list with the reference "dp1" first (added if missing, moved if elsewhere) and duplicates removed.
std::vector<StrategySpec> with_reference_first(std::vector<StrategySpec> specs);

}  // namespace sp::plan
