// The gate's criteria (criteria.h) by what they check, one function each; only the table in criteria.cc
// calls them. criteria_bundle.cc: the bundle as the protocol wrote it (seal, one contract, records that
// agree, every stage ran). criteria_crosscheck.cc: what one view records against another view or the contract
// (gradient norms, clipping and skips, learning rates, steps, the recovery's own resume). criteria_prediction.cc: the
// parallel run against its plan (topology, traces, traffic, ledger). criteria_reference.cc: the parallel run against
// the single-device reference (gradients, drift, held-out eval, throughput). criteria_recovery.cc: checkpoints, the
// fault and the recovery.
#pragma once

#include <string>
#include <string_view>

#include "proof/criteria.h"

namespace sp::proof::criterion {

// A required criterion; the detail is kept only when it fails.
Criterion make(std::string_view name, bool passed, std::string measured, std::string threshold, std::string evidence,
               std::string detail = {});
// A held-out loss equal to the reference's: bit for bit, or (not bitwise: one evaluated from the reference's
// state on the parallel topology) within the single-step loss tolerance.
bool same_eval(double a, double b, const GateContext& c);
// The first problem of a comparison ("" when it holds).
std::string problem_of(const Result<RunEquivalence>& e);

// criteria_bundle.cc
Criterion sealed(const GateContext& c);
Criterion signed_seal(const GateContext& c);
Criterion one_contract(const GateContext& c);
Criterion records_agree(const GateContext& c);
Criterion stages_completed(const GateContext& c);
// criteria_crosscheck.cc
Criterion grad_norms_agree(const GateContext& c);
Criterion optimizer_follows_gradient(const GateContext& c);
Criterion lr_follows_schedule(const GateContext& c);
Criterion steps_as_contracted(const GateContext& c);
Criterion recovery_resumed_itself(const GateContext& c);
// criteria_prediction.cc
Criterion topology_valid(const GateContext& c);
Criterion traces_consistent(const GateContext& c);
Criterion traced_bytes(const GateContext& c);
Criterion prediction_rederived(const GateContext& c);
Criterion ledger_equal(const GateContext& c);
// criteria_reference.cc
Criterion gradients_equal(const GateContext& c);
Criterion trajectory_drift(const GateContext& c);
Criterion eval_improves(const GateContext& c);
Criterion throughput(const GateContext& c);
// criteria_recovery.cc
Criterion checkpoints_verify(const GateContext& c);
Criterion resume_exact(const GateContext& c);
Criterion fault_localized(const GateContext& c);
Criterion recovery_reproduces(const GateContext& c);

}  // namespace sp::proof::criterion
