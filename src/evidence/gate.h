// The gate: the verdict of the proof protocol (gate.json + summary.md, docs/formats/gate.md).
// A gate is a list of criteria, each with a measured value, a threshold, a pass flag and the evidence
// file it was derived from; it passes only if every required criterion passes. Throughput is
// reported as information and can never make a gate pass. The criteria are computed from files
// alone (parallel/proof.h), so `shardproof verify DIR` re-derives the same gate for a third party.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace sp::evidence {

struct Criterion {
  std::string name;       // "traces consistent", ...
  bool passed = false;
  bool required = true;   // false: reported only (throughput)
  std::string measured;   // human-readable measured value
  std::string threshold;  // what it had to be
  std::string evidence;   // file(s) it comes from, relative to the bundle
  std::string detail;     // the first problem found, if any
};

struct Gate {
  std::vector<Criterion> criteria;
  bool passed() const;
  Criterion& add(std::string name, bool passed, std::string measured, std::string threshold, std::string evidence,
                 std::string detail = {});
  nlohmann::json to_json() const;
  std::string summary_markdown(const std::string& title, const std::vector<std::string>& notes) const;
};

}  // namespace sp::evidence
