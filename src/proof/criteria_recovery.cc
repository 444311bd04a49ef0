// Checkpoints, the fault and the recovery (criteria_rows.h): what the protocol's k, fault and recovery stages show.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>

#include "ckpt/load.h"
#include "ckpt/names.h"
#include "core/json_io.h"
#include "plan/promise.h"
#include "proof/criteria_rows.h"

namespace sp::proof::criterion {

using nlohmann::json;
using namespace evidence;  // file names (bundle_paths.h)

namespace {

// The smallest step of the run's own traced training traffic (a resumed run starts at its checkpoint).
int64_t first_traced_step(const TraceReport& r) {
  int64_t first = INT64_MAX;
  for (const auto& [k, t] : r.traffic)
    if (k.phase != comm::Phase::kSetup && k.phase != comm::Phase::kCheckpoint) first = std::min(first, k.step);
  return first;
}

}  // namespace

// 9. Every checkpoint of the parallel run verifies; one exists at step k.
Criterion checkpoints_verify(const GateContext& c) {
  const int64_t k = c.bundle->checkpoint_step();
  const ckpt::CheckpointPaths paths = c.bundle->paths().parallel().checkpoints();
  auto listing = ckpt::list_checkpoints(paths);
  std::string problem;
  int verified = 0;
  if (!listing.ok())
    problem = listing.status().message();
  else if (std::find(listing->steps.begin(), listing->steps.end(), k) == listing->steps.end())
    problem = fmt::format("no checkpoint at step {}", k);
  // Each manifest binds the contract it was saved under (issue 45: a bundle cut to fewer steps, its contracts
  // edited and rehashed, kept checkpoints of the longer run): it must be the parallel stage's contract.
  auto stage_contract = read_json_file(c.bundle->paths().parallel().contract());
  const std::string want = stage_contract.ok() ? stage_contract->value("hash", std::string()) : std::string();
  if (listing.ok())
    for (int64_t s : listing->steps) {
      Status st = ckpt::verify_checkpoint(paths, s);
      if (st.ok())
        if (auto m = ckpt::read_manifest(paths, s); m.ok() && m->contract_hash != want)
          st = failed_precondition(
              "{}: saved under contract {} (config.train.steps {}), but {} is {} (config.train.steps {})",
              stage_file(kParallelStage, fmt::format("{}/step-{:06d}/manifest.json", kCheckpointsDir, s)),
              m->contract_hash.substr(0, 16),
              m->contract.value("config", json::object()).value("train", json::object()).value("steps", int64_t{-1}),
              stage_file(kParallelStage, kContractFile), want.substr(0, 16), c.config.train.steps);
      if (!st.ok()) {
        if (problem.empty()) problem = st.message();
      } else {
        ++verified;
      }
    }
  return make("checkpoints verify", problem.empty(), fmt::format("{} checkpoint(s) verified", verified),
              fmt::format("every shard's size and SHA-256, every manifest saved under the stage's contract; one at "
                          "step {}",
                          k),
              stage_dir(kParallelStage, kCheckpointsDir), problem);
}

// 10. The recovery run resumed at step k (not from scratch) and reproduces the parallel run bit for bit.
Criterion resume_exact(const GateContext& c) {
  const int64_t k = c.bundle->checkpoint_step();
  const RunPaths rec = c.bundle->paths().recovery(), par = c.bundle->paths().parallel();
  auto cmp = compare_checksums(rec.checksums(), par.checksums(),
                               {.promised = Equivalence::kBitwise, .expected = plan::expected_records(c.config)});
  auto trace = check_trace_dir(rec.root());
  const int64_t first = trace.ok() ? first_traced_step(*trace) : -1;
  const bool resumed = first == k;
  const bool exact = cmp.ok() && cmp->verdict == Equivalence::kBitwise;
  return make(
      "resume is exact", exact && resumed,
      fmt::format("resumed at step {}; {}", first == INT64_MAX ? -1 : first, cmp.ok() ? cmp->describe() : "unreadable"),
      fmt::format("training resumes at step {} and reproduces the parallel run bit for bit", k),
      fmt::format("{}, {}, {}", stage_dir(kRecoveryStage, kTraceDir), stage_file(kRecoveryStage, kChecksumsFile),
                  stage_file(kParallelStage, kChecksumsFile)),
      !resumed
          ? fmt::format("the recovery run's traces start at step {}, not at the checkpoint's step {}", first, k)
          : (!cmp.ok()                ? cmp.status().message()
             : !cmp->problems.empty() ? cmp->problems.front()
                                      : (cmp->first_mismatch.empty() ? "" : cmp->first_mismatch.front().to_string())));
}

// 11. The fault: detected, by the expected view, at the expected step (and rank, where a view names one).
Criterion fault_localized(const GateContext& c) {
  const FaultSpec& fault = c.bundle->fault();
  const FaultInfo& info = fault_info(fault.kind);
  const Detection* e = c.divergence.earliest();
  std::string why;
  if (e == nullptr)
    why = "no view saw the fault";
  else if (e->view != info.expected_view)
    why = fmt::format("first seen by {}, expected {}", view_name(e->view), view_name(info.expected_view));
  else if (e->step != fault.step)
    why = fmt::format("seen at step {}, injected at step {}", e->step, fault.step);
  else if (!e->ranks.empty() && info.reach == Reach::kOneRank && e->ranks != std::vector<int>{fault.rank})
    why = fmt::format("names rank(s) {}, injected on rank {} alone", fmt::join(e->ranks, ","), fault.rank);
  return make("fault detected and localized", why.empty(), c.divergence.line(),
              fmt::format("{} at step {} ({})", view_name(info.expected_view), fault.step, info.expectation),
              fmt::format("{}, {}/", kFirstDivergenceFile, kFaultStage), why);
}

// 12. Recovery: the reference trajectory again, eval included. Not bitwise: the recovery's final eval is the
//     clean parallel run's, bit for bit (one contract on one topology, resumed exactly), and that eval is
//     verified against the reference by the eval criterion (from the reference's state).
Criterion recovery_reproduces(const GateContext& c) {
  const RunPaths rec = c.bundle->paths().recovery(), ref = c.bundle->paths().reference();
  auto cmp = compare_runs(rec, ref);
  const auto want = c.bitwise ? Equivalence::kBitwise : Equivalence::kWithinTolerance;
  const RunPaths eval_ref = c.bitwise ? ref : c.bundle->paths().parallel();
  const auto got_eval = final_eval(rec), ref_eval = final_eval(eval_ref);
  // Every eval the recovery ran (after its checkpoint) equals the one it reproduces, bit for bit.
  std::string eval_problem;
  const std::map<int64_t, double> reproduced = eval_losses(eval_ref), got = eval_losses(rec);
  for (const auto& [s, v] : reproduced) {
    if (s < c.bundle->checkpoint_step()) continue;  // before the resume: the copied prefix
    const auto it = got.find(s);
    if (it == got.end() || std::memcmp(&it->second, &v, sizeof v) != 0) {
      eval_problem =
          fmt::format("{}: the eval after step {}: {}, {}'s {:.17g}", stage_file(kRecoveryStage, kMetricsFile), s,
                      it == got.end() ? std::string("missing") : fmt::format("{:.17g}", it->second),
                      c.bitwise ? kReferenceStage : kParallelStage, v);
      break;
    }
  }
  const bool eval_ok = got_eval && ref_eval && eval_problem.empty();
  const bool ok = cmp.ok() && cmp->holds() && eval_ok;
  return make(
      "recovery reproduces the reference", ok,
      fmt::format("{}; final eval {} vs {}", cmp.ok() ? cmp->describe() : "unreadable",
                  got_eval ? fmt::format("{:.6f}", *got_eval) : "none",
                  ref_eval ? fmt::format("{:.6f}", *ref_eval) : "none"),
      c.bitwise ? fmt::format("{} to the reference, eval included", equivalence_name(want))
                : "the reference's step 0 within tolerance; final eval equal to the clean parallel run's",
      fmt::format("{}, {}, {}/{}", stage_file(kRecoveryStage, kChecksumsFile), stage_file(kRecoveryStage, kMetricsFile),
                  c.bitwise ? kReferenceStage : kParallelStage, c.bitwise ? "" : fmt::format(", {}/", kReferenceStage)),
      !eval_ok && problem_of(cmp).empty() ? (!eval_problem.empty() ? eval_problem : "the recovery has no final eval")
                                          : problem_of(cmp));
}

}  // namespace sp::proof::criterion
