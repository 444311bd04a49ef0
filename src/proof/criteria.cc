#include "proof/criteria.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <map>

#include "ckpt/load.h"
#include "ckpt/names.h"
#include "comm/process_grid.h"
#include "comm/topology.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/checksums.h"
#include "evidence/contract.h"
#include "plan/traffic_model.h"
#include "proof/seal.h"

namespace sp::proof {
namespace {

using nlohmann::json;
using namespace evidence;  // file names (bundle_paths.h)

Criterion make(std::string_view name, bool passed, std::string measured, std::string threshold, std::string evidence,
               std::string detail = {}) {
  return {std::string(name),
          passed,
          true,
          std::move(measured),
          std::move(threshold),
          std::move(evidence),
          passed ? std::string() : std::move(detail)};
}

// The smallest step of the run's own traced training traffic (a resumed run starts at its checkpoint).
int64_t first_traced_step(const TraceReport& r) {
  int64_t first = INT64_MAX;
  for (const auto& [k, t] : r.traffic)
    if (k.phase != comm::Phase::kSetup && k.phase != comm::Phase::kCheckpoint) first = std::min(first, k.step);
  return first;
}

// A held-out loss equal to the reference's: bit for bit, or (not bitwise) within the drift band.
bool same_eval(double a, double b, const GateContext& c) {
  return c.bitwise ? std::memcmp(&a, &b, sizeof a) == 0 : std::fabs(a - b) <= c.eval_band * std::fabs(b);
}

std::string problem_of(const Result<RunEquivalence>& e) {
  if (!e.ok()) return e.status().message();
  const Comparison& c = e->comparison;
  if (!c.problems.empty()) return c.problems.front();
  return c.divergence.empty() ? "" : c.divergence.front().to_string();
}

// 0. Seal: every file as the protocol wrote it.
Criterion sealed(const GateContext& c) {
  auto bad = check_seal(c.bundle->paths().root());
  const bool ok = bad.ok() && bad->empty();
  return make("bundle sealed and unmodified", ok, ok ? fmt::format("every file matches {}", kSealFile) : "modified",
              "no file added, removed or changed", std::string(kSealFile),
              !bad.ok() ? bad.status().message() : fmt::format("{}", fmt::join(*bad, "; ")));
}

// 0b. Signature: whether the seal carries one (reported only: the gate is a function of the files;
//     `verify --key PUB` checks the signature itself, since only a key tells a resealed bundle apart).
Criterion signed_seal(const GateContext& c) {
  const bool signed_bundle = path_exists(c.bundle->paths().signature());
  Criterion out = make("seal signed (reported only)", true,
                       signed_bundle ? "signed (verify --key PUB checks the signature)" : "not signed",
                       "none: anyone can recompute a seal; a signature needs the key", std::string(kSignatureFile));
  out.required = false;
  return out;
}

// 1. Contract: frozen, verified, and every stage ran under it.
Criterion one_contract(const GateContext& c) {
  const json& frozen = c.bundle->contract();
  std::vector<std::string> problems;
  if (Status s = verify_contract(frozen, std::string(kContractFile)); !s.ok()) problems.push_back(s.message());
  std::vector<std::string_view> stages(kStageNames.begin(), kStageNames.end());
  if (!c.bundle->anchors().empty()) stages.push_back(kAnchoredStage);
  if (!c.bundle->fault_anchors().empty()) stages.push_back(kFaultAnchoredStage);
  for (std::string_view stage : stages) {
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
              "identical up to topology and evidence settings", fmt::format("{}, */{}", kContractFile, kContractFile),
              problems.empty() ? "" : problems.front());
}

// 1b. What is recorded twice agrees: each stage's loss in metrics.jsonl is, bit for bit, the loss its
//     checksums.jsonl holds at that step (a loss edited in one place only is caught here).
Criterion records_agree(const GateContext& c) {
  std::vector<std::string> problems;
  int64_t checked = 0;
  std::vector<std::string_view> stages = {kReferenceStage, kParallelStage, kRecoveryStage};
  if (!c.bundle->anchors().empty()) stages.push_back(kAnchoredStage);
  for (std::string_view stage : stages) {
    const RunPaths run = c.bundle->paths().stage(stage);
    auto records = read_checksums(run.checksums());
    if (!records.ok()) {
      problems.push_back(records.status().message());
      continue;
    }
    std::map<int64_t, double> loss;
    std::map<int64_t, const ChecksumRecord*> scaler;  // fp16
    for (const ChecksumRecord& r : *records) {
      if (r.key.phase == "loss") loss[r.key.step] = r.value;
      if (r.key.phase == evidence::kScalerPhase) scaler[r.key.step] = &r;
    }
    for (const json& m : metrics_records(run)) {
      const int64_t step = m.value("step", int64_t{-1});
      if (step < 0 || !m.contains("loss")) continue;
      ++checked;
      // fp16: the loss scale and the skip, recorded in both files, agree exactly.
      const auto sc = scaler.find(step);
      if (m.contains("loss_scale") != (sc != scaler.end()))
        problems.push_back(fmt::format("step {}: {} {} a loss scale, {} {}", step, stage_file(stage, kMetricsFile),
                                       m.contains("loss_scale") ? "has" : "has no", stage_file(stage, kChecksumsFile),
                                       sc != scaler.end() ? "has a scaler record" : "has no scaler record"));
      else if (sc != scaler.end() &&
               (m.value("loss_scale", 0.0) != sc->second->scale || m.value("skipped", false) != sc->second->skipped))
        problems.push_back(fmt::format("step {}: {} says loss scale {} (skipped {}), {} says {} (skipped {})", step,
                                       stage_file(stage, kMetricsFile), m.value("loss_scale", 0.0),
                                       m.value("skipped", false), stage_file(stage, kChecksumsFile), sc->second->scale,
                                       sc->second->skipped));
      const auto it = loss.find(step);
      const double v = m["loss"].is_number() ? m["loss"].get<double>() : std::nan("");
      if (it == loss.end())
        problems.push_back(fmt::format("{}: step {} has a loss but {} has none", stage_file(stage, kMetricsFile), step,
                                       stage_file(stage, kChecksumsFile)));
      else if (std::memcmp(&v, &it->second, sizeof v) != 0 && !(std::isnan(v) && std::isnan(it->second)))
        problems.push_back(fmt::format("step {}: {} says loss {:.17g}, {} says {:.17g}", step,
                                       stage_file(stage, kMetricsFile), v, stage_file(stage, kChecksumsFile),
                                       it->second));
    }
  }
  return make("records agree across views", problems.empty(),
              fmt::format("{} losses compared, {} differ", checked, problems.size()),
              "metrics.jsonl and checksums.jsonl hold the same loss bits (fp16: loss scale and skip) at every step",
              fmt::format("*/{}, */{}", kMetricsFile, kChecksumsFile), problems.empty() ? "" : problems.front());
}

// 2. The stages ran to completion (the fault stage may not).
Criterion stages_completed(const GateContext& c) {
  std::vector<std::string> failed;
  std::vector<std::string_view> required = {"contract", kReferenceStage, kParallelStage, kRecoveryStage};
  if (!c.bundle->anchors().empty()) required.push_back(kAnchoredStage);
  for (std::string_view stage : required) {
    const json* st = c.bundle->stage(stage);
    if (st == nullptr)
      failed.push_back(fmt::format("{}: did not run", stage));
    else if (st->value("exit_code", -1) != 0)
      failed.push_back(fmt::format("{}: exit {}: {}", stage, st->value("exit_code", -1), st->value("error", "")));
  }
  return make(
      "stages completed", failed.empty(),
      failed.empty() ? fmt::format("{}: exit 0", fmt::join(required, ", ")) : fmt::format("{} failed", failed.size()),
      "exit 0", std::string(kProveFile), failed.empty() ? "" : failed.front());
}

// 3. The parallel stage's topology re-derives a complete grid of the contract's dp·tp·pp.
Criterion topology_valid(const GateContext& c) {
  const config::ParallelConfig& pc = c.config.parallel;
  auto topo = read_json_file(c.bundle->paths().parallel().topology());
  Status s = topo.ok() ? comm::validate_topology(*topo) : topo.status();
  if (s.ok() && topo->value("world_size", 0) != pc.world())
    s = corrupt("world_size {} ≠ dp·tp·pp = {}", topo->value("world_size", 0), pc.world());
  return make("topology valid", s.ok(),
              fmt::format("dp {} × tp {} × pp {} = {} ranks", pc.dp, pc.tp, pc.pp, pc.world()),
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
  return make(
      "traced bytes equal the prediction", ok,
      r.ok() ? fmt::format("{} cells, {} differ; {} bytes traced", r->prediction_cells, r->prediction_mismatches.size(),
                           bytes)
             : "unreadable",
      "ops and bytes per rank, step, group and phase as comm_model predicts",
      fmt::format("{}, {}", stage_dir(kParallelStage, kTraceDir), stage_file(kParallelStage, kCommPredictedFile)),
      !r.ok() ? r.status().message()
              : (!r->prediction_mismatches.empty() ? r->prediction_mismatches.front().message
                                                   : (r->prediction_found ? "" : "no comm_predicted.json")));
}

// 6. The prediction file itself is the plan's, not an edited one.
Criterion prediction_rederived(const GateContext& c) {
  const config::ParallelConfig& pc = c.config.parallel;
  auto grid = comm::ProcessGrid::create(pc.dp, pc.tp, pc.pp, pc.axis_order, pc.workers());  // the workers' grid
  auto stored = read_json_file(c.bundle->paths().parallel().comm_predicted());
  const bool same = grid.ok() && stored.ok() && *stored == plan::predict_run_traffic(c.plan, *grid);
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

// 8. Gradients (and losses, parameters) against the single-device reference, in the class the contract
//    promises: bit for bit, or (tensor parallelism, fast reductions) within the single-step tolerance at
//    every anchored step, the free-running run complete and within it at step 0.
Criterion gradients_equal(const GateContext& c) {
  const auto& free = c.parallel_vs_reference;
  const std::string files =
      fmt::format("{}, {}", stage_file(kParallelStage, kChecksumsFile), stage_file(kReferenceStage, kChecksumsFile));
  if (c.bitwise)
    return make("gradients equal the single-device reference", free.ok() && free->holds(),
                free.ok() ? free->describe() : "unreadable", "bitwise: the contract's class (docs/equivalence.md)",
                files, problem_of(free));
  const auto& anchored = c.anchored_vs_reference;
  const bool ok = free.ok() && free->holds() && anchored.ok() && anchored->holds();
  return make("gradients equal the single-device reference", ok,
              anchored.ok() ? anchored->describe() : fmt::format("anchored replay: {}", anchored.status().message()),
              "within the single-step tolerances at every anchored step (docs/equivalence.md §anchored)",
              fmt::format("{}, {}", stage_file(kAnchoredStage, kChecksumsFile), files),
              !anchored.ok() || !anchored->holds() ? problem_of(anchored) : problem_of(free));
}

// 8b. How far the free-running trajectories drift (reported, never required): rounding amplified by
//     training, the reason a non-bitwise class is verified per anchored step and not by trajectory.
Criterion trajectory_drift(const GateContext& c) {
  const auto& free = c.parallel_vs_reference;
  double worst = 0;
  int64_t at = -1;
  if (free.ok())
    for (const auto& [s, d] : free->comparison.drift_per_step)
      if (d > worst) worst = d, at = s;
  Criterion out = make("trajectory drift (reported only)", true,
                       !free.ok()  ? "unreadable"
                       : c.bitwise ? "none: bitwise"
                                   : fmt::format("max rel. difference {:.2g} (step {}), loss {:.2g}; eval band {:.2g}",
                                                 worst, at, free->comparison.max_loss_drift, c.eval_band),
                       "none: drift of a non-bitwise class is expected (docs/equivalence.md)",
                       fmt::format("{}, {}", kDriftFile, stage_file(kParallelStage, kChecksumsFile)));
  out.required = false;
  return out;
}

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
  if (listing.ok())
    for (int64_t s : listing->steps) {
      if (Status st = ckpt::verify_checkpoint(paths, s); !st.ok()) {
        if (problem.empty()) problem = st.message();
      } else {
        ++verified;
      }
    }
  return make("checkpoints verify", problem.empty(), fmt::format("{} checkpoint(s) verified", verified),
              fmt::format("every shard's size and SHA-256; one at step {}", k),
              stage_dir(kParallelStage, kCheckpointsDir), problem);
}

// 10. The recovery run resumed at step k (not from scratch) and reproduces the parallel run bit for bit.
Criterion resume_exact(const GateContext& c) {
  const int64_t k = c.bundle->checkpoint_step();
  const RunPaths rec = c.bundle->paths().recovery(), par = c.bundle->paths().parallel();
  auto cmp = compare_checksums(rec.checksums(), par.checksums(),
                               {.promised = Equivalence::kBitwise, .expected = expected_records(c.config)});
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

// 12. Recovery: the reference trajectory again, eval included.
Criterion recovery_reproduces(const GateContext& c) {
  const RunPaths rec = c.bundle->paths().recovery(), ref = c.bundle->paths().reference();
  auto cmp = compare_runs(rec, ref);
  const auto want = c.bitwise ? Equivalence::kBitwise : Equivalence::kWithinTolerance;
  const auto got_eval = final_eval(rec), ref_eval = final_eval(ref);
  const bool eval_ok = got_eval && ref_eval && same_eval(*got_eval, *ref_eval, c);
  const bool ok = cmp.ok() && cmp->holds() && eval_ok;
  return make("recovery reproduces the reference", ok,
              fmt::format("{}; final eval {} vs {}", cmp.ok() ? cmp->describe() : "unreadable",
                          got_eval ? fmt::format("{:.6f}", *got_eval) : "none",
                          ref_eval ? fmt::format("{:.6f}", *ref_eval) : "none"),
              c.bitwise ? fmt::format("{} to the reference, eval included", equivalence_name(want))
                        : fmt::format("the reference's step 0 within tolerance, eval within the drift band {:.2g}",
                                      c.eval_band),
              fmt::format("{}, {}, {}/", stage_file(kRecoveryStage, kChecksumsFile),
                          stage_file(kRecoveryStage, kMetricsFile), kReferenceStage),
              !eval_ok && problem_of(cmp).empty() ? "the final eval differs from the reference's" : problem_of(cmp));
}

// 13. Independent evaluation on the held-out split.
Criterion eval_improves(const GateContext& c) {
  const RunPaths par = c.bundle->paths().parallel(), ref = c.bundle->paths().reference();
  const auto init = initial_eval(par), fin = final_eval(par), ref_fin = final_eval(ref);
  const double margin = c.config.prove.eval_margin;
  const bool improves = init && fin && *fin <= *init - margin;
  const bool matches = fin && ref_fin && same_eval(*fin, *ref_fin, c);
  return make("held-out eval improves and matches the reference", improves && matches,
              init && fin ? fmt::format("{:.4f} → {:.4f} (−{:.4f} nats); reference {:.4f}", *init, *fin, *init - *fin,
                                        ref_fin.value_or(NAN))
                          : "missing",
              c.bitwise
                  ? fmt::format("drop ≥ {} nats, equal to the reference", margin)
                  : fmt::format("drop ≥ {} nats, within the drift band {:.2g} of the reference", margin, c.eval_band),
              fmt::format("{}, {}, {} (data.split_sha256)", stage_file(kParallelStage, kMetricsFile),
                          stage_file(kReferenceStage, kMetricsFile), kContractFile),
              improves ? "the parallel eval differs from the reference's" : "the eval loss did not improve enough");
}

// 14. Throughput: reported, never sufficient.
Criterion throughput(const GateContext& c) {
  const double t_ref = median_tokens_per_s(c.bundle->paths().reference());
  const double t_par = median_tokens_per_s(c.bundle->paths().parallel());
  Criterion out =
      make("throughput (reported only)", true,
           fmt::format("{:.0f} tokens/s on {} ranks vs {:.0f} on one ({:.2f}x)", t_par, c.config.parallel.world(),
                       t_ref, t_ref > 0 ? t_par / t_ref : 0.0),
           "none: speed proves nothing about correctness",
           fmt::format("{}, {}", stage_file(kParallelStage, kMetricsFile), stage_file(kReferenceStage, kMetricsFile)));
  out.required = false;
  return out;
}

}  // namespace

Result<GateContext> GateContext::make(const ProofBundle& bundle) {
  GateContext c;
  c.bundle = &bundle;
  SP_ASSIGN_OR_RETURN(c.config, config::RunConfig::from_json(bundle.contract()["config"]));
  SP_ASSIGN_OR_RETURN(c.plan, plan::RunPlan::make(c.config, c.config.parallel.world()));
  const RunPaths par = bundle.paths().parallel(), ref = bundle.paths().reference();
  c.bitwise = promised_class(c.config) == Equivalence::kBitwise;
  c.parallel_trace = check_trace_dir(par.root());
  c.parallel_vs_reference = compare_runs(par, ref);
  if (!c.bitwise) {
    c.anchored_vs_reference = bundle.anchors().empty()
                                  ? Result<RunEquivalence>(failed_precondition(
                                        "prove.json lists no anchors: the configuration is not bitwise and was not "
                                        "replayed from the reference's state"))
                                  : compare_runs(bundle.paths().anchored(), ref);
    // The held-out loss of two trajectories that drift may differ by what their training losses differ by,
    // twice (another batch), but never less than the single-step tolerance.
    const double drift = c.parallel_vs_reference.ok() ? c.parallel_vs_reference->comparison.max_loss_drift : 0.0;
    c.eval_band = std::max(Tolerances{}.loss, 2 * drift);
  }
  c.divergence = locate_first_divergence(bundle, c.config, c.bitwise, tolerances_for(c.config));
  return c;
}

const std::vector<CriterionRule>& gate_criteria() {
  static const std::vector<CriterionRule> k = {
      {"bundle sealed and unmodified", sealed},
      {"seal signed (reported only)", signed_seal},
      {"one contract across the stages", one_contract},
      {"records agree across views", records_agree},
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
      {"fault detected and localized", fault_localized},
      {"recovery reproduces the reference", recovery_reproduces},
      {"held-out eval improves and matches the reference", eval_improves},
      {"throughput (reported only)", throughput},
  };
  return k;
}

}  // namespace sp::proof
