// Strategy: one point of the planner's search space — how a training step is split over ranks
// (dp, tp, pp, virtual stages, pipeline schedule, ZeRO stage, activation recompute, micro-batch size).
// It is not a run configuration (config/run_config.h holds the engine's, with data, seeds and evidence);
// config_for_strategy (planner/evaluate.h) maps one onto the other for the engine's own models; the pipeline
// schedule is the engine's own enum.
// Invariant: names round-trip — strategy_name() is unique per strategy and stable, so excluded and ranked
// lists are diffable between runs. Reference: docs/plan.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "config/run_config.h"

namespace sp::planner {

// Activation recompute: none; selective = recompute the attention core (Korthikanti et al. 2022 §4.2);
// full = recompute every block's forward from its input in backward.
enum class RecomputeMode { kNone, kSelective, kFull };

std::string recompute_label(RecomputeMode r);                               // "none", "selective", "full"
std::optional<config::Schedule> schedule_from_label(const std::string& s);  // "gpipe", "1f1b", "interleaved"
std::optional<RecomputeMode> recompute_from_label(const std::string& s);
// The engine runs every mode (model::Recompute, model/llama_stage.h): one to one, both ways.
RecomputeMode recompute_mode(model::Recompute r);
model::Recompute engine_recompute(RecomputeMode r);

struct Strategy {
  int dp = 1, tp = 1, pp = 1;
  int virtual_stages = 1;                               // v > 1 only with the interleaved schedule
  config::Schedule schedule = config::Schedule::k1F1B;  // the engine's (config/run_config.h)
  int zero = 0;                                         // ZeRO stage over dp: 0 (plain DP), 1, 2, 3
  RecomputeMode recompute = RecomputeMode::kNone;
  int64_t micro_batch_size = 1;  // B, sequences per micro-batch
  // Megatron sequence parallelism (parallel.sequence_parallel, tp > 1): norms and residuals on 1/tp of the
  // sequence; priced by the engine's own ledger and traffic models.
  bool sequence_parallel = false;

  int world() const { return dp * tp * pp; }
  bool operator==(const Strategy&) const = default;
};

// "dp8.tp8.pp4.v2.interleaved.zero1.recompute-full.mb2", with ".sp" appended under sequence parallelism.
std::string strategy_name(const Strategy& s);
nlohmann::json strategy_to_json(const Strategy& s);

}  // namespace sp::planner
