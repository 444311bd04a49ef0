// comm_predicted.json, format 2 (docs/formats/comm_predicted.md): the traffic each rank must issue,
// described per step class, so its size does not depend on the number of steps. A step's traffic
// depends only on whether parameter checksums are taken in it and whether an evaluation follows it
// (StepSchedule, the one rule the trainer, the prediction and its checkers share); step −1 is the
// evaluation before training. Not the model that predicts the traffic (plan/traffic_model.h) nor the
// comparison with a trace (trace_prediction.h): the schedule rule and the file's reader.
// Invariant: class_of(step) is the class of the traffic the trainer issues in `step`, for every step in
// [−1, steps); parse_comm_prediction accepts only documents whose every cell is well formed.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"

namespace sp::evidence {

// Which steps take parameter checksums and which are followed by an evaluation.
struct StepSchedule {
  int64_t steps = 1;           // train.steps
  int64_t checksum_every = 0;  // evidence.checksum_every: checksums in step s when s % checksum_every == 0; 0 = never
  int64_t eval_every = 0;  // train.eval_every: evaluation after s when (s + 1) % eval_every == 0; and after the last
  bool checksums(int64_t step) const { return checksum_every > 0 && step % checksum_every == 0; }
  bool eval_after(int64_t step) const { return (eval_every > 0 && (step + 1) % eval_every == 0) || step + 1 == steps; }
  // The class name of `step` ("initial_eval" for −1), or nullopt outside [−1, steps).
  std::optional<std::string_view> class_of(int64_t step) const;
  nlohmann::json to_json() const;
};

inline constexpr std::string_view kInitialEvalClass = "initial_eval";
// "step", "step+checksums", "step+eval", "step+checksums+eval".
std::string_view step_class_name(bool checksums, bool eval_after);
// Every class a format-2 document describes, in this order.
inline constexpr std::string_view kStepClasses[] = {kInitialEvalClass, "step", "step+checksums", "step+eval",
                                                    "step+checksums+eval"};

// Ops and payload bytes of one rank in one (group, phase) of one step.
struct TrafficCell {
  int64_t ops = 0;
  int64_t bytes = 0;
  bool operator==(const TrafficCell&) const = default;
};
using ClassTraffic = std::map<std::pair<std::string, std::string>, TrafficCell>;  // (group, phase) → cell

struct CommPrediction {
  StepSchedule schedule;
  std::map<int, std::map<std::string, ClassTraffic, std::less<>>> ranks;  // world rank → class → cells
  // The cells of `rank` in `step`; null when the rank is not described; empty outside [−1, steps).
  const ClassTraffic* step(int rank, int64_t step) const;
};

// Validates a comm_predicted.json document (format 2): every key, type and range; errors name the key.
Result<CommPrediction> parse_comm_prediction(const nlohmann::json& doc, const std::string& label);

}  // namespace sp::evidence
