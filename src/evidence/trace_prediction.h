// Traced traffic against the prediction: for every rank, step, group and phase, the ops and payload
// bytes in trace/rank-N.jsonl must equal those in comm_predicted.json (plan/traffic_model.h). Agreement
// among ranks (trace_check.h) cannot see a collective that every rank skips or adds; this can.
// Compared: every step from the first traced one (a resumed run's trace starts at its checkpoint
// step) to where each rank's trace ends, each against its step class's cells (comm_prediction.h); a
// run that stopped early is reported by other views, and what it never reached is counted in a
// warning, not compared. Work is O(traced records): a long run of untraced steps is one mismatch.
// Not compared: phases `setup` and `checkpoint`, whose agreement traffic depends on the file system's
// answers, not on the plan (docs/formats/trace.md).
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "evidence/trace_check.h"

namespace sp::evidence {

// Fills report.prediction_* from `predicted` (the comm_predicted.json document). A malformed document
// is one mismatch naming the key.
void compare_with_prediction(const std::vector<RankTrace>& ranks, const nlohmann::json& predicted, TraceReport& report);

}  // namespace sp::evidence
