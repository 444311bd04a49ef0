#include "proof/criteria.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "ckpt/load.h"
#include "ckpt/names.h"
#include "comm/process_grid.h"
#include "comm/topology.h"
#include "core/json_io.h"
#include "evidence/contract.h"
#include "parallel/comm_model.h"
#include "proof/seal.h"

namespace sp::proof {
namespace {

using nlohmann::json;
using namespace evidence;  // file names (bundle_paths.h)

Criterion make(std::string_view name, bool passed, std::string measured, std::string threshold, std::string evidence,
               std::string detail = {}) {
  return {std::string(name), passed, true, std::move(measured), std::move(threshold), std::move(evidence),
          passed ? std::string() : std::move(detail)};
}

std::string describe(const Comparison& c) {
  return fmt::format("{} ({} of {} records bitwise; max rel. loss {:.2g}, params {:.2g}, grads {:.2g}/{:.2g})",
                     equivalence_name(c.verdict), c.bitwise_records, c.records, c.max_rel_loss, c.max_rel_param,
                     c.max_rel_grad_first, c.max_rel_grad_later);
}

// The smallest step of the run's own traced training traffic (a resumed run starts at its checkpoint).
int64_t first_traced_step(const TraceReport& r) {
  int64_t first = INT64_MAX;
  for (const auto& [k, t] : r.traffic)
    if (k.phase != comm::Phase::kSetup && k.phase != comm::Phase::kCheckpoint) first = std::min(first, k.step);
  return first;
}

bool same_eval(double a, double b, bool bitwise) {
  return bitwise ? std::memcmp(&a, &b, sizeof a) == 0 : std::fabs(a - b) <= Tolerances{}.loss * std::fabs(b);
}

// 0. Seal: every file as the protocol wrote it.
Criterion sealed(const GateContext& c) {
  auto bad = check_seal(c.bundle->paths().root());
  const bool ok = bad.ok() && bad->empty();
  return make("bundle sealed and unmodified", ok, ok ? fmt::format("every file matches {}", kSealFile) : "modified",
              "no file added, removed or changed", std::string(kSealFile),
              !bad.ok() ? bad.status().message() : fmt::format("{}", fmt::join(*bad, "; ")));
}

// 1. Contract: frozen, verified, and every stage ran under it.
Criterion one_contract(const GateContext& c) {
  const json& frozen = c.bundle->contract();
  std::vector<std::string> problems;
  if (Status s = verify_contract(frozen, std::string(kContractFile)); !s.ok()) problems.push_back(s.message());
  for (std::string_view stage : kStageNames) {
    const std::string label = stage_file(stage, kContractFile);
    auto sc = read_json_file(c.bundle->paths().stage(stage).contract());
    if (!sc.ok()) {
      problems.push_back(fmt::format("{}: {}", label, sc.status().message()));
      continue;
    }
    if (Status s = verify_contract(*sc, label); !s.ok()) problems.push_back(s.message());
    for (const std::string& d : contract_diff(frozen, *sc, stage_contract_differences()))
      problems.push_back(fmt::format("{}: {}", label, d));
    const json par = (*sc)["config"]["parallel"];
    const bool reference = stage == kReferenceStage;
    if (reference && (par.value("dp", 0) != 1 || par.value("tp", 0) != 1 || par.value("pp", 0) != 1))
      problems.push_back(fmt::format("{}: not the single-device topology", label));
    if (!reference && par != frozen["config"]["parallel"])
      problems.push_back(fmt::format("{}: config.parallel differs from the frozen contract", label));
  }
  return make("one contract across the stages", problems.empty(),
              problems.empty() ? fmt::format("hash {}", frozen.value("hash", std::string()).substr(0, 16))
                               : fmt::format("{} difference(s)", problems.size()),
              "identical up to topology and evidence settings",
              fmt::format("{}, */{}", kContractFile, kContractFile), problems.empty() ? "" : problems.front());
}

// 2. The stages ran to completion (the fault stage may not).
Criterion stages_completed(const GateContext& c) {
  std::vector<std::string> failed;
  for (const char* stage : {"contract", "reference", "parallel", "recovery"}) {
    const json* st = c.bundle->stage(stage);
    if (st == nullptr) failed.push_back(fmt::format("{}: did not run", stage));
    else if (st->value("exit_code", -1) != 0)
      failed.push_back(fmt::format("{}: exit {}: {}", stage, st->value("exit_code", -1), st->value("error", "")));
  }
  return make("stages completed", failed.empty(),
              failed.empty() ? "contract, reference, parallel, recovery: exit 0" : fmt::format("{} failed", failed.size()),
              "exit 0", std::string(kProveFile), failed.empty() ? "" : failed.front());
}

// 3. The parallel stage's topology re-derives a complete grid of the contract's dp·tp·pp.
Criterion topology_valid(const GateContext& c) {
  const parallel::ParallelConfig& pc = c.config.parallel;
  auto topo = read_json_file(c.bundle->paths().parallel().topology());
  Status s = topo.ok() ? comm::validate_topology(*topo) : topo.status();
  if (s.ok() && topo->value("world_size", 0) != pc.world())
    s = corrupt("world_size {} ≠ dp·tp·pp = {}", topo->value("world_size", 0), pc.world());
  return make("topology valid", s.ok(), fmt::format("dp {} × tp {} × pp {} = {} ranks", pc.dp, pc.tp, pc.pp, pc.world()),
              "a complete, consistent grid", stage_file(kParallelStage, kTopologyFile), s.message());
}

// 4. Traces: every group's members issued the same collectives.
Criterion traces_consistent(const GateContext& c) {
  const auto& r = c.parallel_trace;
  const bool ok = r.ok() && r->consistent();
  return make("traces consistent", ok,
              r.ok() ? fmt::format("{} records, {} mismatches", r->records, r->mismatches.size()) : "unreadable",
              "every group's members issued the same collectives", stage_dir(kParallelStage, kTraceDir),
              !r.ok() ? r.status().message() : (r->mismatches.empty() ? "" : r->mismatches.front().message));
}

// 5. ...and equal to the plan's prediction.
Criterion traced_bytes(const GateContext& c) {
  const auto& r = c.parallel_trace;
  const bool ok = r.ok() && r->matches_prediction();
  int64_t bytes = 0;
  if (r.ok())
    for (const auto& [grp, t] : r->group_traffic) bytes += t.bytes;
  return make("traced bytes equal the prediction", ok,
              r.ok() ? fmt::format("{} cells, {} differ; {} bytes traced", r->prediction_cells,
                                   r->prediction_mismatches.size(), bytes)
                     : "unreadable",
              "ops and bytes per rank, step, group and phase as comm_model predicts",
              fmt::format("{}, {}", stage_dir(kParallelStage, kTraceDir), stage_file(kParallelStage, kCommPredictedFile)),
              !r.ok() ? r.status().message()
                      : (!r->prediction_mismatches.empty() ? r->prediction_mismatches.front().message
                                                           : (r->prediction_found ? "" : "no comm_predicted.json")));
}

// 6. The prediction file itself is the plan's, not an edited one.
Criterion prediction_rederived(const GateContext& c) {
  const parallel::ParallelConfig& pc = c.config.parallel;
  auto grid = comm::ProcessGrid::create(pc.dp, pc.tp, pc.pp, pc.axis_order, pc.world());
  auto stored = read_json_file(c.bundle->paths().parallel().comm_predicted());
  const bool same = grid.ok() && stored.ok() && *stored == parallel::predict_run_traffic(c.plan, *grid);
  return make("prediction re-derived from the contract", same, same ? "equal" : "differs",
              "comm_predicted.json = comm_model(contract)",
              fmt::format("{}, {}", stage_file(kParallelStage, kCommPredictedFile), kContractFile),
              !grid.ok() ? grid.status().message()
                         : (stored.ok() ? fmt::format("{} is not the plan's prediction",
                                                      stage_file(kParallelStage, kCommPredictedFile))
                                        : stored.status().message()));
}

// 7. Memory ledger: measured = predicted on every rank, within the budget.
Criterion ledger_equal(const GateContext& c) {
  auto ledger = read_json_file(c.bundle->paths().parallel().ledger());
  const bool equal = ledger.ok() && ledger->value("equal", false);
  const double budget = ledger.ok() ? ledger->value("budget_bytes", 0.0) : 0;
  const double peak = ledger.ok() ? ledger->value("max_peak_bytes", 0.0) : 0;
  const bool fits = budget <= 0 || peak <= budget;
  return make("memory ledger equals the prediction", equal && fits,
              fmt::format("max peak {:.1f} MB per rank{}", peak / 1e6, equal ? ", every category equal" : ", DIFFERS"),
              budget > 0 ? fmt::format("equal, peak ≤ {:.1f} MB", budget / 1e6) : "equal (no budget set)",
              stage_file(kParallelStage, kLedgerFile), ledger.ok() ? "" : ledger.status().message());
}

// 8. Gradients (and losses, parameters) against the single-device reference.
Criterion gradients_equal(const GateContext& c) {
  const auto& r = c.parallel_vs_reference;
  const bool ok = r.ok() && r->verdict != Equivalence::kDivergent && r->records > 0;
  return make("gradients equal the single-device reference", ok, r.ok() ? describe(*r) : "unreadable",
              "bitwise, or within the documented tolerances (docs/equivalence.md)",
              fmt::format("{}, {}", stage_file(kParallelStage, kChecksumsFile), stage_file(kReferenceStage, kChecksumsFile)),
              !r.ok() ? r.status().message() : (r->divergence.empty() ? "" : r->divergence.front().to_string()));
}

// 9. Every checkpoint of the parallel run verifies; one exists at step k.
Criterion checkpoints_verify(const GateContext& c) {
  const int64_t k = c.bundle->checkpoint_step();
  const ckpt::CheckpointPaths paths = c.bundle->paths().parallel().checkpoints();
  auto listing = ckpt::list_checkpoints(paths);
  std::string problem;
  int verified = 0;
  if (!listing.ok()) problem = listing.status().message();
  else if (std::find(listing->steps.begin(), listing->steps.end(), k) == listing->steps.end())
    problem = fmt::format("no checkpoint at step {}", k);
  if (listing.ok())
    for (int64_t s : listing->steps) {
      if (Status st = ckpt::verify_checkpoint(paths, s); !st.ok()) {
        if (problem.empty()) problem = st.message();
      } else {
        ++verified;
      }
    }
  return make("checkpoints verify", problem.empty(), fmt::format("{} checkpoint(s) verified", verified),
              fmt::format("every shard's size and SHA-256; one at step {}", k), stage_dir(kParallelStage, kCheckpointsDir),
              problem);
}

// 10. The recovery run resumed at step k (not from scratch) and reproduces the parallel run bit for bit.
Criterion resume_exact(const GateContext& c) {
  const int64_t k = c.bundle->checkpoint_step();
  const RunPaths rec = c.bundle->paths().recovery(), par = c.bundle->paths().parallel();
  auto cmp = compare_checksums(rec.checksums(), par.checksums());
  auto trace = check_trace_dir(rec.root());
  const int64_t first = trace.ok() ? first_traced_step(*trace) : -1;
  const bool resumed = first == k;
  const bool exact = cmp.ok() && cmp->verdict == Equivalence::kBitwise && cmp->records > 0;
  return make("resume is exact", exact && resumed,
              fmt::format("resumed at step {}; {}", first == INT64_MAX ? -1 : first, cmp.ok() ? describe(*cmp) : "unreadable"),
              fmt::format("training resumes at step {} and reproduces the parallel run bit for bit", k),
              fmt::format("{}, {}, {}", stage_dir(kRecoveryStage, kTraceDir), stage_file(kRecoveryStage, kChecksumsFile),
                          stage_file(kParallelStage, kChecksumsFile)),
              !resumed ? fmt::format("the recovery run's traces start at step {}, not at the checkpoint's step {}", first, k)
                       : (!cmp.ok() ? cmp.status().message()
                                    : (cmp->first_mismatch.empty() ? "" : cmp->first_mismatch.front().to_string())));
}

// 11. The fault: detected, by the expected view, at the expected step (and rank, where a view names one).
Criterion fault_localized(const GateContext& c) {
  const FaultSpec& fault = c.bundle->fault();
  const FaultInfo& info = fault_info(fault.kind);
  const Detection* e = c.divergence.earliest();
  std::string why;
  if (e == nullptr) why = "no view saw the fault";
  else if (e->view != info.expected_view)
    why = fmt::format("first seen by {}, expected {}", view_name(e->view), view_name(info.expected_view));
  else if (e->step != fault.step) why = fmt::format("seen at step {}, injected at step {}", e->step, fault.step);
  else if (!e->ranks.empty() && info.reach == Reach::kOneRank &&
           std::find(e->ranks.begin(), e->ranks.end(), fault.rank) == e->ranks.end())
    why = fmt::format("names rank(s) {}, injected on rank {}", fmt::join(e->ranks, ","), fault.rank);
  return make("fault detected and localized", why.empty(), c.divergence.line(),
              fmt::format("{} at step {} ({})", view_name(info.expected_view), fault.step, info.expectation),
              fmt::format("{}, {}/", kFirstDivergenceFile, kFaultStage), why);
}

// 12. Recovery: the reference trajectory again, eval included.
Criterion recovery_reproduces(const GateContext& c) {
  const RunPaths rec = c.bundle->paths().recovery(), ref = c.bundle->paths().reference();
  auto cmp = compare_checksums(rec.checksums(), ref.checksums());
  const auto want = c.bitwise ? Equivalence::kBitwise : Equivalence::kWithinTolerance;
  const auto got_eval = final_eval(rec), ref_eval = final_eval(ref);
  const bool eval_ok = got_eval && ref_eval && same_eval(*got_eval, *ref_eval, c.bitwise);
  const bool ok = cmp.ok() && cmp->records > 0 && static_cast<int>(cmp->verdict) <= static_cast<int>(want) && eval_ok;
  return make("recovery reproduces the reference", ok,
              fmt::format("{}; final eval {} vs {}", cmp.ok() ? describe(*cmp) : "unreadable",
                          got_eval ? fmt::format("{:.6f}", *got_eval) : "none",
                          ref_eval ? fmt::format("{:.6f}", *ref_eval) : "none"),
              fmt::format("{} to the reference, eval included", equivalence_name(want)),
              fmt::format("{}, {}, {}/", stage_file(kRecoveryStage, kChecksumsFile), stage_file(kRecoveryStage, kMetricsFile),
                          kReferenceStage),
              !cmp.ok() ? cmp.status().message() : (cmp->divergence.empty() ? "" : cmp->divergence.front().to_string()));
}

// 13. Independent evaluation on the held-out split.
Criterion eval_improves(const GateContext& c) {
  const RunPaths par = c.bundle->paths().parallel(), ref = c.bundle->paths().reference();
  const auto init = initial_eval(par), fin = final_eval(par), ref_fin = final_eval(ref);
  const double margin = c.config.prove.eval_margin;
  const bool improves = init && fin && *fin <= *init - margin;
  const bool matches = fin && ref_fin && same_eval(*fin, *ref_fin, c.bitwise);
  return make("held-out eval improves and matches the reference", improves && matches,
              init && fin ? fmt::format("{:.4f} → {:.4f} (−{:.4f} nats); reference {:.4f}", *init, *fin, *init - *fin,
                                        ref_fin.value_or(NAN))
                          : "missing",
              fmt::format("drop ≥ {} nats, equal to the reference", margin),
              fmt::format("{}, {}, {} (data.split_sha256)", stage_file(kParallelStage, kMetricsFile),
                          stage_file(kReferenceStage, kMetricsFile), kContractFile),
              improves ? "the parallel eval differs from the reference's" : "the eval loss did not improve enough");
}

// 14. Throughput: reported, never sufficient.
Criterion throughput(const GateContext& c) {
  const double t_ref = median_tokens_per_s(c.bundle->paths().reference());
  const double t_par = median_tokens_per_s(c.bundle->paths().parallel());
  Criterion out = make("throughput (reported only)", true,
                       fmt::format("{:.0f} tokens/s on {} ranks vs {:.0f} on one ({:.2f}x)", t_par,
                                   c.config.parallel.world(), t_ref, t_ref > 0 ? t_par / t_ref : 0.0),
                       "none: speed proves nothing about correctness",
                       fmt::format("{}, {}", stage_file(kParallelStage, kMetricsFile), stage_file(kReferenceStage, kMetricsFile)));
  out.required = false;
  return out;
}

}  // namespace

Result<GateContext> GateContext::make(const ProofBundle& bundle) {
  GateContext c;
  c.bundle = &bundle;
  SP_ASSIGN_OR_RETURN(c.config, parallel::RunConfig::from_json(bundle.contract()["config"]));
  SP_ASSIGN_OR_RETURN(c.plan, parallel::Plan::make(c.config, c.config.parallel.world()));
  const RunPaths par = bundle.paths().parallel(), ref = bundle.paths().reference();
  c.parallel_trace = check_trace_dir(par.root());
  c.parallel_vs_reference = compare_checksums(par.checksums(), ref.checksums());
  c.bitwise = c.parallel_vs_reference.ok() && c.parallel_vs_reference->verdict == Equivalence::kBitwise;
  c.divergence = locate_first_divergence(bundle, c.bitwise);
  return c;
}

const std::vector<CriterionRule>& gate_criteria() {
  static const std::vector<CriterionRule> k = {
      {"bundle sealed and unmodified", sealed},
      {"one contract across the stages", one_contract},
      {"stages completed", stages_completed},
      {"topology valid", topology_valid},
      {"traces consistent", traces_consistent},
      {"traced bytes equal the prediction", traced_bytes},
      {"prediction re-derived from the contract", prediction_rederived},
      {"memory ledger equals the prediction", ledger_equal},
      {"gradients equal the single-device reference", gradients_equal},
      {"checkpoints verify", checkpoints_verify},
      {"resume is exact", resume_exact},
      {"fault detected and localized", fault_localized},
      {"recovery reproduces the reference", recovery_reproduces},
      {"held-out eval improves and matches the reference", eval_improves},
      {"throughput (reported only)", throughput},
  };
  return k;
}

}  // namespace sp::proof
