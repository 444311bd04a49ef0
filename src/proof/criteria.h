// The gate's criteria (docs/prove.md §gate), one function each, in one table that derive_gate walks
// in order. Each function reads what it needs of the bundle through a GateContext and returns one
// Criterion: measured value, threshold, the files behind it and, when it fails, the first problem.
// Adding a criterion is adding a function (criteria_rows.h, in the file of its kind) and a row; tests/proof/ tampers
// with a real bundle so that each row fails on its own evidence. Invariant: a criterion never throws away a problem:
// unreadable evidence fails the criterion that needed it, naming the file.
#pragma once

#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "config/run_config.h"
#include "core/status.h"
#include "evidence/compare.h"
#include "evidence/trace_check.h"
#include "plan/run_plan.h"
#include "proof/bundle.h"
#include "proof/equivalence.h"
#include "proof/first_divergence.h"
#include "proof/gate.h"

namespace sp::proof {

// What the criteria share: the bundle, the configuration re-derived from its frozen contract, and the
// readings more than one criterion uses (computed once).
struct GateContext {
  static Result<GateContext> make(const ProofBundle& bundle);
  const ProofBundle* bundle = nullptr;
  config::RunConfig config;
  plan::RunPlan plan;
  Result<evidence::TraceReport> parallel_trace = internal_error("not read");  // the parallel stage's trace check
  Result<RunEquivalence> parallel_vs_reference = internal_error("not read");  // free-running
  Result<RunEquivalence> anchored_vs_reference = internal_error("not run");   // non-bitwise promises only
  bool bitwise = false;  // the contract promises bitwise equality (plan/promise.h promised_class)
  // Not bitwise: the held-out eval is verified like a step, from the reference's state: the anchored replay
  // evaluates the reference's state at each evaluation point on the parallel topology (anchored/metrics.jsonl,
  // "anchor" = s + 1 for the eval after step s), within the single-step loss tolerance of the reference's eval
  // there (tolerances_for). The free-running runs' evals drift apart like their trajectories: information.
  double eval_tolerance = 0;
  std::map<int64_t, double> anchored_evals;  // eval step → loss (−1: the initial eval)
  FirstDivergence divergence;                // of the fault stage
};

struct CriterionRule {
  std::string_view name;
  Criterion (*check)(const GateContext& context);
};
// Every criterion, in the order the gate lists them.
const std::vector<CriterionRule>& gate_criteria();

}  // namespace sp::proof
