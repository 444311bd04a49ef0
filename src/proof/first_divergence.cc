#include "proof/first_divergence.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <regex>
#include <tuple>

#include "ckpt/load.h"
#include "ckpt/names.h"
#include "core/json_io.h"
#include "evidence/activations.h"
#include "evidence/trace_check.h"
#include "plan/promise.h"
#include "proof/equivalence.h"

namespace sp::proof {
using json = nlohmann::json;
using namespace evidence;  // file names (bundle_paths.h), views (faults.h), Equivalence (compare.h)
using evidence::View;

namespace {

// Where in a step a view observes (docs/prove.md): a crash is seen before anything the dead rank
// failed to do; then the phases in the order a step runs them.
int trace_point(const std::string& phase) {
  // "evidence" collectives run twice a step (the loss sum before the optimizer, the checksums and
  // replica digests after it): the earlier point is taken. A parameter server's push is its gradient
  // synchronization, its pull the distribution of the update (docs/ps.md).
  static const std::map<std::string, int> k = {{"forward", 1},  {"backward", 2},  {"grad_sync", 3}, {"push", 3},
                                               {"evidence", 4}, {"optimizer", 5}, {"pull", 5},      {"checkpoint", 8},
                                               {"eval", 9},     {"setup", 0}};
  const auto it = k.find(phase);
  return it == k.end() ? 10 : it->second;
}
// The loss scaler's verdict (fp16) comes from the step's gradients: the same point as they (the file
// order, scaler before grad, names the scaler first when both differ).
int checksum_point(const std::string& phase) { return phase == "param" ? 6 : 4; }

// A trace file's records, or none (a crashed rank's torn tail is dropped).
std::vector<json> trace_records(const std::string& path) {
  auto doc = read_jsonl_file(path, TornTail::kAllow);
  return doc.ok() ? std::move(doc->records) : std::vector<json>{};
}

bool same_loss(double a, double b, bool bitwise, double tol) {
  if (bitwise) return std::memcmp(&a, &b, sizeof a) == 0;
  return std::fabs(a - b) <= tol * std::max(std::fabs(b), 1e-30);
}

std::string fmt_g(double v) { return fmt::format("{:.6g}", v); }

Detection trace_detection(const evidence::TraceReport& r, bool prediction) {
  Detection d{.view = prediction ? View::kTraceVsPrediction : View::kTraceConsistency};
  d.evidence = fmt::format("{}, {}", stage_dir(kFaultStage, kTraceDir),
                           stage_file(kFaultStage, prediction ? kCommPredictedFile : kTopologyFile));
  const auto& list = prediction ? r.prediction_mismatches : r.mismatches;
  if (prediction && !r.prediction_found) {
    d.recorded = false;
    d.detail = "no comm_predicted.json";
    return d;
  }
  if (list.empty()) return d;
  const evidence::TraceMismatch& m = list.front();
  d.found = true;
  d.step = m.step;
  d.phase = m.phase.empty() ? "setup" : m.phase;
  d.point = trace_point(d.phase);
  // Consistency: the rank(s) whose sequence departs from the group's majority in the earliest mismatch
  // (later mismatches follow from it). Prediction: every rank whose traffic differs from the plan at that
  // step and phase (a fault on every rank shows on every rank).
  if (prediction) {
    for (const evidence::TraceMismatch& o : list)
      if (o.step == m.step && o.phase == m.phase)
        for (int r : o.ranks)
          if (std::find(d.ranks.begin(), d.ranks.end(), r) == d.ranks.end()) d.ranks.push_back(r);
  } else {
    d.ranks = m.ranks;
  }
  std::sort(d.ranks.begin(), d.ranks.end());
  d.tensor = m.group;
  d.detail = m.message;
  return d;
}

}  // namespace

json Detection::to_json() const {
  json j = {{"view", evidence::view_name(view)}, {"recorded", recorded}, {"found", found}, {"evidence", evidence}};
  if (found) {
    j["step"] = step;
    j["phase"] = phase;
    j["ranks"] = ranks;
    if (!tensor.empty()) j["tensor"] = tensor;
  }
  if (!detail.empty()) j["detail"] = detail;
  return j;
}

json FirstDivergence::to_json() const {
  json j = {{"views", json::array()}, {"first", nullptr}, {"propagation", json::array()}};
  for (const Detection& d : views) j["views"].push_back(d.to_json());
  if (const Detection* e = earliest()) j["first"] = e->to_json();
  for (const auto& [s, n] : propagation) j["propagation"].push_back({{"step", s}, {"records", n}});
  return j;
}

std::string FirstDivergence::line() const {
  const Detection* e = earliest();
  if (e == nullptr) return "first divergence: none (no view differs from the reference)";
  std::string s = fmt::format("first divergence: {} at step {}, {}", evidence::view_name(e->view), e->step, e->phase);
  if (!e->ranks.empty()) s += fmt::format(", rank {}", fmt::join(e->ranks, ","));
  if (!e->tensor.empty()) s += ", " + e->tensor;
  if (!propagation.empty()) {
    s += "; then";
    for (size_t i = 0; i < propagation.size() && i < 4; ++i)
      s += fmt::format(" step {}: {} records{}", propagation[i].first, propagation[i].second,
                       i + 1 < std::min<size_t>(propagation.size(), 4) ? "," : "");
    if (propagation.size() > 4) s += ", ...";
  }
  return s;
}

FaultReading fault_reading(const ProofBundle& bundle, const config::RunConfig& config, bool bitwise,
                           const evidence::Tolerances& tol) {
  const bool replayed = !bitwise && !bundle.fault_anchors().empty();
  const bool exact = bitwise || !replayed;  // bit for bit, or within the single-step tolerances
  return {
      .numbers = replayed ? bundle.paths().fault_anchored() : bundle.paths().fault(),
      .against = bitwise || replayed ? bundle.paths().reference() : bundle.paths().parallel(),
      .numbers_stage = replayed ? kFaultAnchoredStage : kFaultStage,
      .against_stage = bitwise || replayed ? kReferenceStage : kParallelStage,
      .replayed = replayed,
      .spec = {.tol = tol,
               .promised = exact ? Equivalence::kBitwise : Equivalence::kWithinTolerance,
               .expected = plan::expected_records(config, replayed ? bundle.fault_anchors() : std::vector<int64_t>{}),
               .reference_expected = plan::expected_records(config),
               .anchored = replayed,
               .require_complete = false}};
}

namespace {

// Job: how the fault stage ended; a crashed rank is seen before anything it failed to do.
Detection job_detection(const ProofBundle& bundle) {
  const evidence::RunPaths fault = bundle.paths().fault();
  Detection job{.view = View::kJob,
                .evidence = fmt::format("{} (stages), {}", kProveFile, ProofPaths::log_file(kFaultStage))};
  const json* st = bundle.stage("fault");
  if (st == nullptr || st->value("exit_code", 0) == 0) return job;
  job.found = true;
  job.detail = st->value("error", fmt::format("exit status {}", st->value("exit_code", 0)));
  const int crashed = st->value("crashed_rank", -1);
  if (crashed >= 0) {
    job.ranks = {crashed};
    job.phase = "crash";
    job.point = 0;
    // The step the dead rank was in: its trace's last record.
    const auto recs = trace_records(fault.trace(crashed));
    job.step = recs.empty() ? 0 : recs.back().value("step", int64_t{0});
    if (!recs.empty()) job.phase = "crash during " + recs.back().value("phase", std::string("?"));
    return job;
  }
  job.phase = "exit";
  job.point = 10;
  // The step the job ended in: the latest step any rank's trace reached.
  job.step = -1;
  for (int r = 0; r < bundle.world_size(); ++r) {
    const auto recs = trace_records(fault.trace(r));
    if (!recs.empty()) job.step = std::max(job.step, recs.back().value("step", int64_t{-1}));
  }
  if (job.step < 0) {
    const auto m = metrics_records(fault);
    job.step = m.empty() ? 0 : m.back().value("step", int64_t{-1}) + 1;
  }
  return job;
}

// Per-layer activations of every training micro-batch against the reference's, in forward order.
Detection activation_detection(const ProofBundle& bundle, const FaultReading& reading, double tol) {
  Detection d{.view = View::kActivations,
              .evidence = fmt::format("{}, {}", stage_dir(reading.numbers_stage, kActivationsDir),
                                      stage_dir(reading.against_stage, kActivationsDir))};
  auto c = evidence::compare_activations(reading.numbers.root(), reading.against.root(),
                                         reading.spec.promised == Equivalence::kBitwise, tol,
                                         reading.replayed ? bundle.fault_anchors() : std::vector<int64_t>{});
  if (!c.ok()) {
    d.recorded = false;
    d.detail = c.status().message();
  } else if (!c->recorded || !c->reference_recorded) {
    d.recorded = false;
    d.detail = "evidence.activation_digests was off";
  } else if (c->first) {
    const evidence::ActivationDifference& a = *c->first;
    d.found = true;
    d.step = a.step;
    d.phase = "forward";
    d.point = 1;
    if (a.rank >= 0) d.ranks = {a.rank};
    d.tensor = fmt::format("{} (micro-batch {})", a.point, a.micro_batch);
    d.detail = a.message;
  }
  return d;
}

// Gradient checksums (and losses, parameters) against the single-device reference; `propagation` gets the
// records out of class per step.
Detection checksum_detection(const FaultReading& reading, std::vector<std::pair<int64_t, int64_t>>& propagation) {
  Detection d{.view = View::kChecksums,
              .evidence = fmt::format("{}, {}", stage_file(reading.numbers_stage, kChecksumsFile),
                                      stage_file(reading.against_stage, kChecksumsFile))};
  auto c = evidence::compare_checksums(reading.numbers.checksums(), reading.against.checksums(), reading.spec);
  if (!c.ok()) {
    d.recorded = false;
    d.detail = c.status().message();
    return d;
  }
  if (!c->problems.empty()) d.detail = c->problems.front();
  if (!c->divergence.empty()) {
    const evidence::Divergence& v = c->divergence.front();
    d.found = true;
    d.step = v.step;
    d.phase = v.phase;
    d.point = checksum_point(v.phase);
    d.tensor = v.tensor;
    d.detail = v.to_string();
  }
  propagation = c->divergent_per_step;
  return d;
}

// Replicas: the dp-replica digest exchange recorded in metrics.jsonl.
Detection replica_detection(const evidence::RunPaths& fault) {
  Detection d{.view = View::kReplicas, .evidence = stage_file(kFaultStage, kMetricsFile)};
  for (const json& m : metrics_records(fault))
    if (m.contains("diverging_ranks") && !m["diverging_ranks"].empty()) {
      d.found = true;
      d.step = m.value("step", int64_t{0});
      d.phase = "evidence";
      d.point = 7;
      d.ranks = m["diverging_ranks"].get<std::vector<int>>();
      d.detail = fmt::format("dp replicas differ after step {}: world rank(s) {}", d.step, fmt::join(d.ranks, ", "));
      break;
    }
  return d;
}

// Checkpoints: every committed checkpoint of the fault run, fully verified.
Detection checkpoint_detection(const evidence::RunPaths& fault) {
  Detection d{.view = View::kCheckpoint, .evidence = stage_dir(kFaultStage, kCheckpointsDir)};
  const ckpt::CheckpointPaths paths = fault.checkpoints();
  auto listing = ckpt::list_checkpoints(paths);
  if (!listing.ok() || listing->steps.empty()) {
    d.recorded = false;
    d.detail = "the fault run saved no checkpoint";
    return d;
  }
  for (int64_t s : listing->steps)
    if (Status v = ckpt::verify_checkpoint(paths, s); !v.ok()) {
      d.found = true;
      d.step = s - 1;  // saved after step s − 1
      d.phase = "checkpoint";
      d.point = 8;
      d.detail = v.message();
      std::smatch m;
      static const std::regex kShard("rank-(\\d{5})\\.safetensors");
      if (std::regex_search(d.detail, m, kShard)) d.ranks = {std::stoi(m[1].str())};
      break;
    }
  return d;
}

// Eval: the held-out loss at every evaluation of the free-running fault run, against the reference bit for
// bit (bitwise), or against the clean parallel run.
Detection eval_detection(const ProofBundle& bundle, bool bitwise, double tol) {
  const evidence::RunPaths against = bitwise ? bundle.paths().reference() : bundle.paths().parallel();
  Detection d{.view = View::kEval,
              .evidence = fmt::format("{}, {}", stage_file(kFaultStage, kMetricsFile),
                                      stage_file(bitwise ? kReferenceStage : kParallelStage, kMetricsFile))};
  const auto got = eval_losses(bundle.paths().fault()), want = eval_losses(against);
  for (const auto& [s, v] : got)
    if (auto it = want.find(s); it != want.end() && !same_loss(v, it->second, true, tol)) {
      d.found = true;
      d.step = s;
      d.phase = "eval";
      d.point = 9;
      d.detail = fmt::format("eval loss {} vs reference {}", fmt_g(v), fmt_g(it->second));
      break;
    }
  return d;
}

}  // namespace

FirstDivergence locate_first_divergence(const ProofBundle& bundle, const config::RunConfig& config, bool bitwise,
                                        const evidence::Tolerances& tol) {
  const evidence::RunPaths fault = bundle.paths().fault();
  // What each reference-comparing view reads (the header says why).
  const FaultReading reading = fault_reading(bundle, config, bitwise, tol);
  FirstDivergence out;
  // Traces: agreement among ranks, and against the plan.
  Detection consistency{.view = View::kTraceConsistency}, prediction{.view = View::kTraceVsPrediction};
  if (auto report = evidence::check_trace_dir(fault.root()); report.ok()) {
    consistency = trace_detection(*report, false);
    prediction = trace_detection(*report, true);
  } else {
    consistency.recorded = prediction.recorded = false;
    consistency.detail = prediction.detail = report.status().message();
  }
  const Detection checksums = checksum_detection(reading, out.propagation);
  out.views = {consistency,
               prediction,
               activation_detection(bundle, reading, tol.loss),
               checksums,
               replica_detection(fault),
               checkpoint_detection(fault),
               eval_detection(bundle, bitwise, tol.loss),
               job_detection(bundle)};
  for (size_t i = 0; i < out.views.size(); ++i) {
    const Detection& d = out.views[i];
    if (!d.found) continue;
    const Detection* e = out.earliest();
    if (e == nullptr || std::make_tuple(d.step, d.point) < std::make_tuple(e->step, e->point))
      out.first = static_cast<int>(i);
  }
  return out;
}

}  // namespace sp::proof
