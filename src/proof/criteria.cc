// The gate's context, computed once, and its table of criteria (criteria.h); the rows are in criteria_rows.h.
#include "proof/criteria.h"

#include <fmt/format.h>

#include <algorithm>

#include "plan/promise.h"
#include "proof/criteria_rows.h"

namespace sp::proof {

using namespace evidence;  // file names (bundle_paths.h)

Criterion criterion::make(std::string_view name, bool passed, std::string measured, std::string threshold,
                          std::string evidence, std::string detail) {
  return {std::string(name),
          passed,
          true,
          std::move(measured),
          std::move(threshold),
          std::move(evidence),
          passed ? std::string() : std::move(detail)};
}

Result<GateContext> GateContext::make(const ProofBundle& bundle) {
  GateContext c;
  c.bundle = &bundle;
  SP_ASSIGN_OR_RETURN(c.config, config::RunConfig::from_json(bundle.contract()["config"]));
  SP_ASSIGN_OR_RETURN(c.plan, plan::RunPlan::make(c.config, c.config.parallel.world()));
  const RunPaths par = bundle.paths().parallel(), ref = bundle.paths().reference();
  c.bitwise = plan::promised_class(c.config) == Equivalence::kBitwise;
  c.parallel_trace = check_trace_dir(par.root());
  c.parallel_vs_reference = compare_runs(par, ref);
  if (!c.bitwise) {
    c.anchored_vs_reference = bundle.anchors().empty()
                                  ? Result<RunEquivalence>(failed_precondition(
                                        "prove.json lists no anchors: the configuration is not bitwise and was not "
                                        "replayed from the reference's state"))
                                  : compare_runs(bundle.paths().anchored(), ref);
    c.eval_tolerance = plan::tolerances_for(c.config).loss;
    for (const nlohmann::json& m : metrics_records(bundle.paths().anchored()))
      if (m.contains("eval_loss") && m["eval_loss"].is_number() &&
          m.value("anchor", int64_t{-2}) == m.value("step", int64_t{-2}) + 1)
        c.anchored_evals[m.value("step", int64_t{-2})] = m["eval_loss"].get<double>();
  }
  c.divergence = locate_first_divergence(bundle, c.config, c.bitwise, plan::tolerances_for(c.config));
  return c;
}

const std::vector<CriterionRule>& gate_criteria() {
  using namespace criterion;  // criteria_rows.h
  static const std::vector<CriterionRule> k = {
      {"bundle sealed and unmodified", sealed},
      {"seal signed (reported only)", signed_seal},
      {"one contract across the stages", one_contract},
      {"records agree across views", records_agree},
      {"gradient norms agree across views", grad_norms_agree},
      {"clipping and skips follow the gradient", optimizer_follows_gradient},
      {"learning rates follow the contract's schedule", lr_follows_schedule},
      {"every view holds the contract's steps", steps_as_contracted},
      {"stages completed", stages_completed},
      {"topology valid", topology_valid},
      {"traces consistent", traces_consistent},
      {"traced bytes equal the prediction", traced_bytes},
      {"prediction re-derived from the contract", prediction_rederived},
      {"memory ledger equals the prediction", ledger_equal},
      {"gradients equal the single-device reference", gradients_equal},
      {"trajectory drift (reported only)", trajectory_drift},
      {"checkpoints verify", checkpoints_verify},
      {"resume is exact", resume_exact},
      {"recovery resumed from its checkpoint", recovery_resumed_itself},
      {"fault detected and localized", fault_localized},
      {"recovery reproduces the reference", recovery_reproduces},
      {"held-out eval improves and matches the reference", eval_improves},
      {"throughput (reported only)", throughput},
  };
  return k;
}

}  // namespace sp::proof
