// The gate of a proof bundle (docs/prove.md §gate): each criterion with its measured value, its
// threshold and the files it was derived from. Part of parallel/proof.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "ckpt/load.h"
#include "ckpt/names.h"
#include "comm/process_grid.h"
#include "comm/topology.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "evidence/contract.h"
#include "evidence/trace_check.h"
#include "parallel/comm_model.h"
#include "parallel/plan.h"
#include "parallel/proof.h"
#include "parallel/run_config.h"
#include "parallel/trainer.h"

namespace sp::parallel {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kSealFile = "bundle.sha256";
// Written after the seal, from the sealed files: `verify` derives them again (report.html: report/render.h).
bool derived_file(const std::string& r) {
  return r == "gate.json" || r == "summary.md" || r == "first_divergence.json" || r == "report.html";
}

std::string describe(const evidence::Comparison& c) {
  return fmt::format("{} ({} of {} records bitwise; max rel. loss {:.2g}, params {:.2g}, grads {:.2g}/{:.2g})",
                     evidence::equivalence_name(c.verdict), c.bitwise_records, c.records, c.max_rel_loss,
                     c.max_rel_param, c.max_rel_grad_first, c.max_rel_grad_later);
}

std::optional<double> last_eval(const std::string& run) {
  std::optional<double> v;
  if (auto lines = evidence::read_jsonl(run + "/metrics.jsonl"); lines.ok())
    for (const json& m : *lines)
      if (m.contains("eval_loss") && m["eval_loss"].is_number() && m.value("step", int64_t{-1}) >= 0)
        v = m["eval_loss"].get<double>();
  return v;
}
std::optional<double> initial_eval(const std::string& run) {
  if (auto lines = evidence::read_jsonl(run + "/metrics.jsonl"); lines.ok())
    for (const json& m : *lines)
      if (m.value("step", int64_t{0}) == -1 && m.contains("eval_loss")) return m["eval_loss"].get<double>();
  return std::nullopt;
}
double median_tokens_per_s(const std::string& run) {
  std::vector<double> v;
  if (auto lines = evidence::read_jsonl(run + "/metrics.jsonl"); lines.ok())
    for (const json& m : *lines)
      if (m.value("step", int64_t{-1}) >= 1 && m.contains("tokens_per_s")) v.push_back(m["tokens_per_s"].get<double>());
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The smallest step of the run's own traced training traffic (a resumed run starts at its checkpoint).
int64_t first_traced_step(const evidence::TraceReport& r) {
  int64_t first = INT64_MAX;
  for (const auto& [k, t] : r.traffic)
    if (k.phase != comm::Phase::kSetup && k.phase != comm::Phase::kCheckpoint) first = std::min(first, k.step);
  return first;
}

// Faults whose effect appears on every rank: a view cannot name the one that caused it. (A stale
// ZeRO-3 shard is gathered into every rank's copy of the unit.)
bool fault_shows_on_every_rank(evidence::FaultKind k) {
  return k == evidence::FaultKind::kSkipGradAllreduce || k == evidence::FaultKind::kDropTpAllreduce ||
         k == evidence::FaultKind::kPpMicrobatchSwap || k == evidence::FaultKind::kZero3StaleParam;
}

}  // namespace

Result<ProofVerdict> derive_gate(const std::string& bundle) {
  ProofVerdict v;
  evidence::Gate& g = v.gate;
  SP_ASSIGN_OR_RETURN(const json prove, read_json_file(bundle + "/prove.json"));
  SP_ASSIGN_OR_RETURN(const json frozen, read_json_file(bundle + "/contract.json"));
  const std::string ref = bundle + "/reference", par = bundle + "/parallel", flt = bundle + "/fault",
                    rec = bundle + "/recovery";
  const int64_t k = prove.value("checkpoint_step", int64_t{0});
  SP_ASSIGN_OR_RETURN(const evidence::FaultSpec fault, evidence::parse_fault(prove.value("fault", std::string())));
  const evidence::FaultInfo& info = evidence::fault_info(fault.kind);

  // 0. Seal: every file as the protocol wrote it.
  {
    auto bad = check_seal(bundle);
    const bool ok = bad.ok() && bad->empty();
    g.add("bundle sealed and unmodified", ok, ok ? "every file matches bundle.sha256" : "modified",
          "no file added, removed or changed", kSealFile,
          !bad.ok() ? bad.status().message() : (bad->empty() ? "" : fmt::format("{}", fmt::join(*bad, "; "))));
  }

  // 1. Contract: frozen, verified, and every stage ran under it.
  {
    std::vector<std::string> problems;
    if (Status s = evidence::verify_contract(frozen, "contract.json"); !s.ok()) problems.push_back(s.message());
    for (const char* stage : kStageDirs) {
      auto c = read_json_file(fmt::format("{}/{}/contract.json", bundle, stage));
      if (!c.ok()) {
        problems.push_back(fmt::format("{}/contract.json: {}", stage, c.status().message()));
        continue;
      }
      if (Status s = evidence::verify_contract(*c, std::string(stage) + "/contract.json"); !s.ok())
        problems.push_back(s.message());
      for (const std::string& d : evidence::contract_diff(frozen, *c, stage_contract_differences()))
        problems.push_back(fmt::format("{}/contract.json: {}", stage, d));
      const json par_cfg = (*c)["config"]["parallel"];
      const bool reference = std::string(stage) == "reference";
      if (reference && (par_cfg.value("dp", 0) != 1 || par_cfg.value("tp", 0) != 1 || par_cfg.value("pp", 0) != 1))
        problems.push_back("reference/contract.json: not the single-device topology");
      if (!reference && par_cfg != frozen["config"]["parallel"])
        problems.push_back(fmt::format("{}/contract.json: config.parallel differs from the frozen contract", stage));
    }
    g.add("one contract across the stages", problems.empty(),
          problems.empty() ? fmt::format("hash {}", frozen.value("hash", std::string()).substr(0, 16))
                           : fmt::format("{} difference(s)", problems.size()),
          "identical up to topology and evidence settings", "contract.json, */contract.json",
          problems.empty() ? "" : problems.front());
  }

  // The frozen configuration, re-read: the plan behind the predictions.
  SP_ASSIGN_OR_RETURN(const RunConfig config, RunConfig::from_json(frozen["config"]));
  const ParallelConfig& pc = config.parallel;
  SP_ASSIGN_OR_RETURN(const Plan plan, Plan::make(config, pc.world()));

  // 2. Stages ran to completion (the fault stage may not).
  {
    std::vector<std::string> failed;
    for (const char* stage : {"contract", "reference", "parallel", "recovery"}) {
      const json* st = find_stage(prove, stage);
      if (st == nullptr) failed.push_back(fmt::format("{}: did not run", stage));
      else if (st->value("exit_code", -1) != 0)
        failed.push_back(fmt::format("{}: exit {}: {}", stage, st->value("exit_code", -1), st->value("error", "")));
    }
    g.add("stages completed", failed.empty(), failed.empty() ? "contract, reference, parallel, recovery: exit 0"
                                                              : fmt::format("{} failed", failed.size()),
          "exit 0", "prove.json", failed.empty() ? "" : failed.front());
  }

  // 3. Topology.
  {
    auto topo = read_json_file(par + "/topology.json");
    Status s = topo.ok() ? comm::validate_topology(*topo) : topo.status();
    if (s.ok() && topo->value("world_size", 0) != pc.world())
      s = corrupt("world_size {} ≠ dp·tp·pp = {}", topo->value("world_size", 0), pc.world());
    g.add("topology valid", s.ok(), fmt::format("dp {} × tp {} × pp {} = {} ranks", pc.dp, pc.tp, pc.pp, pc.world()),
          "a complete, consistent grid", "parallel/topology.json", s.ok() ? "" : s.message());
  }

  // 4. Traces: consistent, and equal to the plan's prediction re-derived here from the contract.
  {
    auto report = evidence::check_trace_dir(par);
    const bool consistent = report.ok() && report->consistent();
    g.add("traces consistent", consistent,
          report.ok() ? fmt::format("{} records, {} mismatches", report->records, report->mismatches.size())
                      : "unreadable",
          "every group's members issued the same collectives", "parallel/trace/",
          !report.ok() ? report.status().message() : (consistent ? "" : report->mismatches.front().message));
    const bool as_predicted = report.ok() && report->matches_prediction();
    int64_t bytes = 0;
    if (report.ok())
      for (const auto& [grp, t] : report->group_traffic) bytes += t.bytes;
    g.add("traced bytes equal the prediction", as_predicted,
          report.ok() ? fmt::format("{} cells, {} differ; {} bytes traced", report->prediction_cells,
                                    report->prediction_mismatches.size(), bytes)
                      : "unreadable",
          "ops and bytes per rank, step, group and phase as comm_model predicts", "parallel/trace/, parallel/comm_predicted.json",
          !report.ok() ? report.status().message()
                       : (report->prediction_mismatches.empty()
                              ? (report->prediction_found ? "" : "no comm_predicted.json")
                              : report->prediction_mismatches.front().message));
    // The prediction file itself must be the plan's, not an edited one.
    SP_ASSIGN_OR_RETURN(const comm::ProcessGrid grid,
                        comm::ProcessGrid::create(pc.dp, pc.tp, pc.pp, pc.axis_order, pc.world()));
    json predicted = {{"format_version", 1}, {"ranks", json::array()}};
    for (int r = 0; r < grid.world_size(); ++r) predicted["ranks"].push_back(predict_run_traffic_for_rank(plan, grid, r));
    auto stored = read_json_file(par + "/comm_predicted.json");
    const bool same = stored.ok() && *stored == predicted;
    g.add("prediction re-derived from the contract", same, same ? "equal" : "differs",
          "comm_predicted.json = comm_model(contract)", "parallel/comm_predicted.json, contract.json",
          same ? "" : (stored.ok() ? "parallel/comm_predicted.json is not the plan's prediction" : stored.status().message()));
  }

  // 5. Memory ledger: measured = predicted on every rank, within the budget.
  {
    auto ledger = read_json_file(par + "/ledger.json");
    const bool equal = ledger.ok() && ledger->value("equal", false);
    const double budget = ledger.ok() ? ledger->value("budget_bytes", 0.0) : 0;
    const double peak = ledger.ok() ? ledger->value("max_peak_bytes", 0.0) : 0;
    const bool fits = budget <= 0 || peak <= budget;
    g.add("memory ledger equals the prediction", equal && fits,
          fmt::format("max peak {:.1f} MB per rank{}", peak / 1e6, equal ? ", every category equal" : ", DIFFERS"),
          budget > 0 ? fmt::format("equal, peak ≤ {:.1f} MB", budget / 1e6) : "equal (no budget set)",
          "parallel/ledger.json", ledger.ok() ? "" : ledger.status().message());
  }

  // 6. Gradients (and losses, parameters) against the single-device reference.
  bool bitwise = false;
  {
    auto c = evidence::compare_checksums(par + "/checksums.jsonl", ref + "/checksums.jsonl");
    const bool ok = c.ok() && c->verdict != evidence::Equivalence::kDivergent && c->records > 0;
    bitwise = c.ok() && c->verdict == evidence::Equivalence::kBitwise;
    g.add("gradients equal the single-device reference", ok, c.ok() ? describe(*c) : "unreadable",
          "bitwise, or within the documented tolerances (docs/equivalence.md)",
          "parallel/checksums.jsonl, reference/checksums.jsonl",
          !c.ok() ? c.status().message() : (c->divergence.empty() ? "" : c->divergence.front().to_string()));
  }

  // 7. Checkpoints verify, and resume exactly.
  {
    const ckpt::CheckpointPaths paths(par);
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
    g.add("checkpoints verify", problem.empty(), fmt::format("{} checkpoint(s) verified", verified),
          fmt::format("every shard's size and SHA-256; one at step {}", k), "parallel/checkpoints/", problem);

    auto c = evidence::compare_checksums(rec + "/checksums.jsonl", par + "/checksums.jsonl");
    auto trace = evidence::check_trace_dir(rec);
    const int64_t first = trace.ok() ? first_traced_step(*trace) : -1;
    const bool resumed = first == k;
    const bool exact = c.ok() && c->verdict == evidence::Equivalence::kBitwise && c->records > 0;
    g.add("resume is exact", exact && resumed,
          fmt::format("resumed at step {}; {}", first == INT64_MAX ? -1 : first, c.ok() ? describe(*c) : "unreadable"),
          fmt::format("training resumes at step {} and reproduces the parallel run bit for bit", k),
          "recovery/trace/, recovery/checksums.jsonl, parallel/checksums.jsonl",
          !resumed ? fmt::format("the recovery run's traces start at step {}, not at the checkpoint's step {}", first, k)
                   : (!c.ok() ? c.status().message()
                              : (c->first_mismatch.empty() ? "" : c->first_mismatch.front().to_string())));
  }

  // 8. The fault: detected, by the expected view, at the expected step (and rank, where a view names one).
  v.divergence = locate_first_divergence(bundle, prove, bitwise);
  {
    const Detection* e = v.divergence.earliest();
    std::string why;
    if (e == nullptr) why = "no view saw the fault";
    else if (e->view != info.expected_view)
      why = fmt::format("first seen by {}, expected {}", evidence::view_name(e->view),
                        evidence::view_name(info.expected_view));
    else if (e->step != fault.step) why = fmt::format("seen at step {}, injected at step {}", e->step, fault.step);
    else if (!e->ranks.empty() && !fault_shows_on_every_rank(fault.kind) &&
             std::find(e->ranks.begin(), e->ranks.end(), fault.rank) == e->ranks.end())
      why = fmt::format("names rank(s) {}, injected on rank {}", fmt::join(e->ranks, ","), fault.rank);
    g.add("fault detected and localized", why.empty(), v.divergence.line(),
          fmt::format("{} at step {} ({})", evidence::view_name(info.expected_view), fault.step, info.expectation),
          "first_divergence.json, fault/", why);
  }

  // 9. Recovery: the reference trajectory again, eval included.
  {
    auto c = evidence::compare_checksums(rec + "/checksums.jsonl", ref + "/checksums.jsonl");
    const auto want = bitwise ? evidence::Equivalence::kBitwise : evidence::Equivalence::kWithinTolerance;
    const auto got_eval = last_eval(rec), ref_eval = last_eval(ref);
    const bool eval_ok = got_eval && ref_eval &&
                         (bitwise ? std::memcmp(&*got_eval, &*ref_eval, sizeof(double)) == 0
                                  : std::fabs(*got_eval - *ref_eval) <= evidence::Tolerances{}.loss * std::fabs(*ref_eval));
    const bool ok = c.ok() && c->records > 0 && static_cast<int>(c->verdict) <= static_cast<int>(want) && eval_ok;
    g.add("recovery reproduces the reference", ok,
          fmt::format("{}; final eval {} vs {}", c.ok() ? describe(*c) : "unreadable",
                      got_eval ? fmt::format("{:.6f}", *got_eval) : "none", ref_eval ? fmt::format("{:.6f}", *ref_eval) : "none"),
          fmt::format("{} to the reference, eval included", evidence::equivalence_name(want)),
          "recovery/checksums.jsonl, recovery/metrics.jsonl, reference/",
          !c.ok() ? c.status().message() : (c->divergence.empty() ? "" : c->divergence.front().to_string()));
  }

  // 10. Independent evaluation on the held-out split.
  {
    const auto init = initial_eval(par), fin = last_eval(par), ref_fin = last_eval(ref);
    const double margin = config.prove.eval_margin;
    const bool improves = init && fin && *fin <= *init - margin;
    const bool matches = fin && ref_fin &&
                         (bitwise ? *fin == *ref_fin
                                  : std::fabs(*fin - *ref_fin) <= evidence::Tolerances{}.loss * std::fabs(*ref_fin));
    g.add("held-out eval improves and matches the reference", improves && matches,
          init && fin ? fmt::format("{:.4f} → {:.4f} (−{:.4f} nats); reference {:.4f}", *init, *fin, *init - *fin,
                                    ref_fin.value_or(NAN))
                      : "missing",
          fmt::format("drop ≥ {} nats, equal to the reference", margin),
          "parallel/metrics.jsonl, reference/metrics.jsonl, contract.json (data.split_sha256)",
          improves ? (matches ? "" : "the parallel eval differs from the reference's") : "the eval loss did not improve enough");
  }

  // 11. Throughput: reported, never sufficient.
  {
    const double t_ref = median_tokens_per_s(ref), t_par = median_tokens_per_s(par);
    g.criteria.push_back({.name = "throughput (reported only)", .passed = true, .required = false,
                          .measured = fmt::format("{:.0f} tokens/s on {} ranks vs {:.0f} on one ({:.2f}x)", t_par,
                                                  pc.world(), t_ref, t_ref > 0 ? t_par / t_ref : 0.0),
                          .threshold = "none: speed proves nothing about correctness",
                          .evidence = "parallel/metrics.jsonl, reference/metrics.jsonl", .detail = ""});
  }
  v.notes.push_back(fmt::format("fault: {} — {}", fault.to_string(), info.breaks));
  v.notes.push_back(v.divergence.line());
  return v;
}

Status seal_bundle(const std::string& bundle) {
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(bundle))
    if (e.is_regular_file()) {
      const std::string r = fs::relative(e.path(), bundle).string();
      if (r != kSealFile && !derived_file(r)) files.push_back(r);
    }
  std::sort(files.begin(), files.end());
  std::string text;
  for (const std::string& f : files) {
    SP_ASSIGN_OR_RETURN(const std::string h, sha256_file(bundle + "/" + f));
    text += h + "  " + f + "\n";
  }
  return write_file_atomic(bundle + "/" + kSealFile, text);
}

Result<std::vector<std::string>> check_seal(const std::string& bundle) {
  SP_ASSIGN_OR_RETURN(const std::string text, read_file(bundle + "/" + kSealFile, uint64_t{1} << 28));
  std::vector<std::string> bad;
  std::set<std::string> listed;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    const std::string line = text.substr(pos, eol == std::string::npos ? std::string::npos : eol - pos);
    pos = eol == std::string::npos ? text.size() : eol + 1;
    if (line.size() < 67 || line.substr(64, 2) != "  ") return corrupt("{}/{}: malformed line '{}'", bundle, kSealFile, line);
    const std::string file = line.substr(66);
    listed.insert(file);
    auto h = sha256_file(bundle + "/" + file);
    if (!h.ok()) bad.push_back(fmt::format("{}: missing", file));
    else if (*h != line.substr(0, 64)) bad.push_back(fmt::format("{}: changed since the bundle was sealed", file));
  }
  for (const auto& e : fs::recursive_directory_iterator(bundle))
    if (e.is_regular_file()) {
      const std::string r = fs::relative(e.path(), bundle).string();
      if (r != kSealFile && !derived_file(r) && !listed.count(r))
        bad.push_back(fmt::format("{}: not in the seal (added later)", r));
    }
  return bad;
}

}  // namespace sp::parallel
