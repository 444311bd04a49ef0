// A plan lab's verdict (docs/labs.md §LSL-I): the criteria over its cases' files, one function each, in one
// table that plan_lab_gate walks in order, like the proof's (criteria.h). The context reads every case once
// (plan_lab_case.h); each criterion judges the cases it concerns and names the first that fails. Each
// criterion re-checks a file's facts against each other rather than trusting one field: "flagged" needs the
// warning AND a tp link that crosses nodes; "dominant on the inter-node link" needs the dominant part's link
// to be that crossing link. Adding a criterion is adding a function and a row; tests/labs/lsl_i_test.sh
// plants damage in a real lab's files so that each row fails on its own evidence.
// Invariant: the gate and summary.md are pure functions of the lab's files and its spec; a missing or
// unreadable case fails every criterion that needs it.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "labs/plan_lab_case.h"
#include "proof/gate.h"

namespace sp::labs {

// What the criteria share: the spec and every case's record, read once, in plan_lab_cases order, and what the
// planner gives for each case from the lab's own inputs (`planner`: case dir → plan.json's document, computed
// by the caller, labs/plan_lab.h, so that the criteria stay functions of what they are given; a case missing
// from it is one whose query did not evaluate).
struct PlanLabContext {
  static PlanLabContext make(const PlanLabSpec& spec, const std::string& dir,
                             std::map<std::string, nlohmann::json> planner);
  PlanLabSpec spec;
  std::vector<PlanLabRecord> records;
  std::map<std::string, nlohmann::json> planner;
  bool is_fault(const PlanLabRecord& r) const { return r.c.placement == spec.fault_placement; }
  // The records of every case, of the sound placements, of the fault placement.
  std::vector<const PlanLabRecord*> all() const;
  std::vector<const PlanLabRecord*> sound() const;
  std::vector<const PlanLabRecord*> fault() const;
  const PlanLabRecord* find(const std::string& cluster, const std::string& placement) const;  // null: no such case
};

struct PlanLabRule {
  std::string_view name;
  proof::Criterion (*check)(const PlanLabContext& context);
};
// Every criterion of a plan lab, in the order the gate lists them.
const std::vector<PlanLabRule>& plan_lab_criteria();

// The gate: every row of plan_lab_criteria on the context.
proof::Gate plan_lab_gate(const PlanLabContext& context);
// summary.md: `heading` ("LSL-I §4.3 Title"), the cases table (cluster × placement → step time, MFU, dominant
// communication and its link, the collectives inside the passes, warnings) and the gate.
std::string plan_lab_summary(const PlanLabContext& context, std::string_view heading, const proof::Gate& gate);

}  // namespace sp::labs
