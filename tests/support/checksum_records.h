// Shared test helper: checksums.jsonl records written by hand (docs/formats/checksums.md), for the tests of
// the checksum comparison. Closed forms: a gradient record is a 4-element tensor of equal values a, so its
// l2 = 2a, sum = 4a, absmax = a; a loss record carries its value and the value's bits.
// Not the engine's writer (evidence/checksums.h): these are what that writer must produce, typed out.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sp::test {

inline nlohmann::json loss_record(int64_t step, double value) {
  return {{"step", step},
          {"phase", "loss"},
          {"tensor", "loss"},
          {"value", value},
          {"bits", fmt::format("{:016x}", std::bit_cast<uint64_t>(value))}};
}

// A 4-element gradient whose values are (a, a, a, a); `digest` names its bits.
inline nlohmann::json grad_record(int64_t step, double a, const std::string& digest) {
  return {{"step", step}, {"phase", "grad"}, {"tensor", "w"},  {"numel", 4},     {"digest", digest}, {"l2", 2 * a},
          {"sum", 4 * a}, {"absmax", a},     {"finite", true}, {"nonfinite", 0}, {"count", 4}};
}

// The fp16 loss scaler's record of a step.
inline nlohmann::json scaler_record(int64_t step, double scale, bool skipped) {
  return {{"step", step}, {"phase", "scaler"}, {"tensor", "loss_scaler"}, {"scale", scale}, {"skipped", skipped}};
}

// The records as JSON Lines text.
inline std::string jsonl_text(const std::vector<nlohmann::json>& records) {
  std::string s;
  for (const nlohmann::json& r : records) s += r.dump() + "\n";
  return s;
}

}  // namespace sp::test
