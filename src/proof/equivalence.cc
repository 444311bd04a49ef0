#include "proof/equivalence.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "ckpt/load.h"
#include "ckpt/manifest.h"
#include "ckpt/names.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/checksums.h"
#include "evidence/contract.h"
#include "plan/promise.h"

namespace sp::proof {

using evidence::Equivalence;
using nlohmann::json;

Result<RunContract> read_run_contract(const evidence::RunPaths& run) {
  RunContract rc;
  SP_ASSIGN_OR_RETURN(rc.contract, read_json_file(run.contract(), uint64_t{1} << 26));
  SP_RETURN_IF_ERROR(evidence::verify_contract(rc.contract, run.contract()));
  if (!rc.contract.contains("config")) return corrupt("'{}': no \"config\"", run.contract());
  SP_ASSIGN_OR_RETURN(rc.config, config::RunConfig::from_json(rc.contract["config"]));
  return rc;
}

Status check_comparable(const RunContract& run, const RunContract& reference, const std::string& run_label,
                        const std::string& reference_label) {
  const std::vector<std::string> diffs =
      evidence::contract_diff(run.contract, reference.contract, evidence::comparable_contract_differences());
  if (diffs.empty()) return Status();
  return failed_precondition("not comparable: {} and {} are not runs of one contract ({} ≠ {}): {}{}", run_label,
                             reference_label, run_label, reference_label, diffs.front(),
                             diffs.size() > 1 ? fmt::format(" (and {} more)", diffs.size() - 1) : "")
      .with_hint(
          "a run is compared with the reference of the same configuration, data, build and seed; only the "
          "topology (config.parallel), recomputation, evaluation and evidence settings may differ" +
          evidence::blas_core_hint(diffs));
}

// The configurations of the checkpoints in a run's directory (their manifests hold the saving run's
// contract): a run resumed from a checkpoint another topology saved carries that topology's steps too.
static std::vector<json> saved_configs(const evidence::RunPaths& run) {
  std::vector<json> out;
  const ckpt::CheckpointPaths paths = run.checkpoints();
  auto listing = ckpt::list_checkpoints(paths);
  if (!listing.ok()) return out;
  for (int64_t step : listing->steps) {
    auto m = ckpt::read_manifest(paths, step);
    if (m.ok() && m->contract.contains("config")) out.push_back(m->contract["config"]);
  }
  return out;
}

// The run's promise: the weakest of its own and those of the checkpoints in its directory.
static Equivalence promised_class_of_run(const std::vector<json>& saved, const config::RunConfig& config) {
  Equivalence promised = plan::promised_class(config);
  for (const json& c : saved)
    if (auto cfg = config::RunConfig::from_json(c); cfg.ok()) promised = std::max(promised, plan::promised_class(*cfg));
  return promised;
}

// Every step of both runs ran on one topology: their config.parallel, and that of every checkpoint either
// resumed from, are equal.
static bool one_topology(const RunContract& run, const RunContract& reference, const std::vector<json>& saved_run,
                         const std::vector<json>& saved_reference) {
  const json& p = run.contract["config"]["parallel"];
  if (p != reference.contract["config"]["parallel"]) return false;
  for (const std::vector<json>* saved : {&saved_run, &saved_reference})
    for (const json& c : *saved)
      if (!c.contains("parallel") || c["parallel"] != p) return false;
  return true;
}

Result<AnchorSet> read_anchors(const evidence::RunPaths& run) {
  AnchorSet a;
  if (!path_exists(run.anchors())) return a;
  SP_ASSIGN_OR_RETURN(const json doc, read_json_file(run.anchors(), uint64_t{1} << 24));
  const JsonFields f(doc, run.anchors(), "anchors.json");
  SP_RETURN_IF_ERROR(f.expect_keys({"format_version", "reference", "warmup", "anchors"}));
  SP_ASSIGN_OR_RETURN(const int64_t version, f.integer("format_version", 1, 1 << 20));
  if (version != evidence::kAnchorsFormatVersion)
    return corrupt("'{}': format_version {} is not the supported {}", run.anchors(), version,
                   evidence::kAnchorsFormatVersion);
  SP_ASSIGN_OR_RETURN(a.warmup, f.integer("warmup", 0, 1));
  SP_ASSIGN_OR_RETURN(const json* list, f.array("anchors"));
  for (size_t i = 0; i < list->size(); ++i) {
    const JsonFields e((*list)[i], run.anchors(), fmt::format("anchors[{}]", i));
    SP_RETURN_IF_ERROR(e.expect_keys({"step", "loaded", "manifest_digest"}));
    SP_ASSIGN_OR_RETURN(const int64_t step, e.integer("step", 0, int64_t{1} << 50));
    if (!a.steps.empty() && step <= a.steps.back()) return e.error("step", "must increase");
    a.steps.push_back(step);
  }
  if (a.steps.empty()) return corrupt("'{}': no anchors", run.anchors());
  return a;
}

std::string RunEquivalence::describe() const {
  const evidence::Comparison& c = comparison;
  if (by_design) {
    double drift = 0;
    for (const auto& [s, d] : c.drift_per_step) drift = std::max(drift, d);
    return fmt::format(
        "divergent-by-design: a bounded-staleness run ({}, fixed schedule) computes on stale parameters, outside "
        "the equivalence guarantee, so it is never a pass against this reference; information: step 0 {} (every "
        "worker computes on version 0), steps 1–{} drift up to {:.2g}; prove the schedule instead against its "
        "single-process replay (parallel.replay_workers, docs/ps.md §SSP){}",
        schedule, evidence::equivalence_name(step0), steps - 1, drift,
        c.verdict == Equivalence::kIncomplete ? "; records: " + c.describe() : "");
  }
  const std::string topology =
      same_topology ? " (one contract on one topology: held to bitwise, the engine is deterministic)" : "";
  if (c.verdict == Equivalence::kIncomplete || c.verdict == Equivalence::kDivergent) return c.describe() + topology;
  if (c.promised == Equivalence::kBitwise) return c.describe() + topology;
  double drift = 0;
  for (const auto& [s, d] : c.drift_per_step) drift = std::max(drift, d);
  if (anchored)
    return fmt::format(
        "{} at every anchored step ({} of {} anchored steps, of train.steps = {}; max rel. loss {:.2g}, params "
        "{:.2g}, grads {:.2g})",
        evidence::equivalence_name(c.verdict), judged_steps, judged_steps, steps, c.max_rel_loss, c.max_rel_param,
        c.max_rel_grad_first);
  if (unverified_steps() == 0)
    return fmt::format("{} at step 0, the run's only step (max rel. loss {:.2g}, params {:.2g}, grads {:.2g})",
                       evidence::equivalence_name(c.verdict), c.max_rel_loss, c.max_rel_param, c.max_rel_grad_first);
  return fmt::format(
      "{} at step 0 only ({} of {} steps verified), where both start from the same state (max rel. loss {:.2g}, "
      "params {:.2g}, grads {:.2g}); steps 1–{} NOT verified: a free-running trajectory that is not bitwise is "
      "not comparable step by step (free-running drift up to {:.2g}, information only); anchor them with `train "
      "--anchor-from` to verify every step",
      evidence::equivalence_name(c.verdict), judged_steps, steps, c.max_rel_loss, c.max_rel_param, c.max_rel_grad_first,
      steps - 1, drift);
}

Result<RunEquivalence> compare_runs(const evidence::RunPaths& run, const evidence::RunPaths& reference,
                                    bool keep_records) {
  SP_ASSIGN_OR_RETURN(const RunContract rc, read_run_contract(run));
  SP_ASSIGN_OR_RETURN(const RunContract ref, read_run_contract(reference));
  SP_RETURN_IF_ERROR(check_comparable(rc, ref, run.root(), reference.root()));
  SP_ASSIGN_OR_RETURN(const AnchorSet anchors, read_anchors(run));
  RunEquivalence e;
  e.anchored = !anchors.steps.empty();
  const std::vector<json> saved = saved_configs(run);
  evidence::CompareSpec spec{.tol = plan::tolerances_for(rc.config),
                             .promised = promised_class_of_run(saved, rc.config),
                             .anchored = e.anchored,
                             .keep_records = keep_records};
  // One contract on one topology: the same bits (the determinism invariant), whatever the class.
  e.same_topology = !e.anchored && one_topology(rc, ref, saved, saved_configs(reference));
  if (e.same_topology) spec.promised = Equivalence::kBitwise;
  // Bounded staleness: bitwise against a run of the same schedule (the replay), else divergent by design,
  // compared for information like a free-running within-tolerance run (step 0 judged).
  const auto mine = plan::stale_schedule(rc.config), theirs = plan::stale_schedule(ref.config);
  if (mine || theirs) {
    if (mine == theirs) {
      spec.promised = Equivalence::kBitwise;
    } else {
      e.by_design = true;
      const auto [W, s] = mine ? *mine : *theirs;
      e.schedule = fmt::format("{} workers, staleness {}", W, s);
      spec.promised = Equivalence::kWithinTolerance;
    }
  }
  if (e.anchored) {
    // Every anchored step starts from the reference's state; the reference must hold those steps too.
    spec.expected = plan::expected_records(rc.config, anchors.steps);
    spec.reference_expected = plan::expected_records(ref.config);
    e.judged_steps = static_cast<int64_t>(anchors.steps.size());
    e.steps = rc.config.train.steps;
  } else {
    spec.expected = plan::expected_records(rc.config);
    e.steps = rc.config.train.steps;
    if (spec.promised != Equivalence::kBitwise) {
      spec.judged_steps = {0};
      e.judged_steps = 1;
    }
  }
  SP_ASSIGN_OR_RETURN(e.comparison, evidence::compare_checksums(run.checksums(), reference.checksums(), spec));
  if (e.by_design) {
    const auto& m = e.comparison.first_mismatch;
    e.step0 = e.comparison.verdict != Equivalence::kWithinTolerance ? e.comparison.verdict
              : m.empty() || m.front().step > 0                     ? Equivalence::kBitwise
                                                                    : Equivalence::kWithinTolerance;
    e.comparison.promised = Equivalence::kDivergentByDesign;
    if (e.comparison.verdict != Equivalence::kIncomplete) e.comparison.verdict = Equivalence::kDivergentByDesign;
  }
  return e;
}

}  // namespace sp::proof
