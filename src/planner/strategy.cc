#include "planner/strategy.h"

#include <fmt/format.h>

namespace sp::planner {

std::string recompute_label(RecomputeMode r) {
  switch (r) {
    case RecomputeMode::kNone:
      return "none";
    case RecomputeMode::kSelective:
      return "selective";
    case RecomputeMode::kFull:
      return "full";
  }
  return "?";
}

std::optional<config::Schedule> schedule_from_label(const std::string& s) {
  for (config::Schedule x :
       {config::Schedule::kGpipe, config::Schedule::k1F1B, config::Schedule::kInterleaved, config::Schedule::kZbH1})
    if (config::schedule_name(x) == s) return x;
  return std::nullopt;
}

RecomputeMode recompute_mode(model::Recompute r) {
  switch (r) {
    case model::Recompute::kNone:
      return RecomputeMode::kNone;
    case model::Recompute::kSelective:
      return RecomputeMode::kSelective;
    case model::Recompute::kFull:
      return RecomputeMode::kFull;
  }
  return RecomputeMode::kNone;
}

model::Recompute engine_recompute(RecomputeMode r) {
  switch (r) {
    case RecomputeMode::kNone:
      return model::Recompute::kNone;
    case RecomputeMode::kSelective:
      return model::Recompute::kSelective;
    case RecomputeMode::kFull:
      return model::Recompute::kFull;
  }
  return model::Recompute::kNone;
}

std::optional<RecomputeMode> recompute_from_label(const std::string& s) {
  for (RecomputeMode x : {RecomputeMode::kNone, RecomputeMode::kSelective, RecomputeMode::kFull})
    if (recompute_label(x) == s) return x;
  return std::nullopt;
}

std::string strategy_name(const Strategy& s) {
  return fmt::format("dp{}.tp{}.pp{}.v{}.{}.zero{}.recompute-{}.mb{}{}", s.dp, s.tp, s.pp, s.virtual_stages,
                     config::schedule_name(s.schedule), s.zero, recompute_label(s.recompute), s.micro_batch_size,
                     s.sequence_parallel ? ".sp" : "");
}

nlohmann::json strategy_to_json(const Strategy& s) {
  return {{"name", strategy_name(s)},
          {"dp", s.dp},
          {"tp", s.tp},
          {"pp", s.pp},
          {"virtual_stages", s.virtual_stages},
          {"schedule", config::schedule_name(s.schedule)},
          {"zero", s.zero},
          {"recompute", recompute_label(s.recompute)},
          {"micro_batch_size", s.micro_batch_size},
          {"sequence_parallel", s.sequence_parallel}};
}

}  // namespace sp::planner
