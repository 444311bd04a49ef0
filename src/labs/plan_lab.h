// Plan labs (kind = "plan" in configs/labs/catalogue.toml, docs/labs.md §LSL-I): one strategy of one model
// evaluated by the planner (planner/evaluate.h, the functions `shardproof plan` uses; no second model) on every
// (cluster, placement) case, each written as `plan --out` writes it (CASE/plan.json + CASE/report.html), then
// summary.md and gate.json derived from those files alone (labs/plan_lab_criteria.h), exit 0 PASS / 1 FAIL.
// Not a proof: nothing trains and nothing here measures hardware; the figures are the planner's.
// Invariant: the code knows no lab; which clusters, placements and fault placement are contrasted is the
// catalogue's data, and the gate's expectations come from the catalogue, never from the files it judges.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "labs/catalogue.h"
#include "labs/plan_lab_case.h"
#include "planner/evaluate.h"

namespace sp::labs {

// The planner's query for one case, built as `shardproof plan --cluster C --nodes N --model M --global-batch B
// --dp --tp --pp --zero ... --axis-order P` builds it for a named shape (the engine's defaults around the
// shape: micro-batch 1, seq_len min(max_seq, 2048), fast reductions, no evaluation, fp32 at 50 %).
// kInvalidArgument naming the lab and the field for a cluster that is not a preset of `root`.
Result<planner::PlanQuery> plan_lab_query(const Lab& lab, const PlanLabCase& c, const std::string& root);

// Everything `lab run` checks before writing: every case's query builds and evaluate_plan accepts it.
Status validate_plan_lab(const Lab& lab, const std::string& root);

// What the planner gives for every case of the lab from the lab's own inputs (the catalogue and the cluster
// presets of `root`): case dir → plan.json's document as `lab run` writes it (written and read back, so that it
// compares with a file's). A case whose query does not build or evaluate is absent.
std::map<std::string, nlohmann::json> plan_lab_derivation(const Lab& lab, const std::string& root);

// `lab run KEY --out DIR` for a plan lab: validates, evaluates and writes every case, then gate.json and
// summary.md; prints the table and the verdict. True when the gate passes; an error for a lab that does not
// validate or a DIR that already holds files (exit 2) or a write error (exit 1).
Result<bool> run_plan_lab(const Lab& lab, const std::string& root, const std::string& out);
// `lab verify KEY DIR`: derives the gate again from DIR's files and the planner's evaluation of the lab's
// inputs (every plan.json must be it), and requires DIR's gate.json and summary.md to equal the derivation byte
// for byte. True when both hold and the gate passes (the last line printed says the same: verdict: PASS or
// FAIL); kNotFound when DIR is no directory.
Result<bool> verify_plan_lab(const Lab& lab, const std::string& dir, const std::string& root);
// `lab check` on a plan lab: the cases whose plan.json is not the planner's evaluation of the lab's inputs
// (the claims would be evaluated on edited figures), one line each; empty when every plan re-derives.
std::vector<std::string> plan_lab_edited_cases(const Lab& lab, const std::string& dir, const std::string& root);

}  // namespace sp::labs
