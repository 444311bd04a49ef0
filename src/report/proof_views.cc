// The views only a proof bundle has (views.h): the gate (proof::derive_gate, the function `verify`
// runs) and the divergence of the fault run from the reference, per tensor and step: every record as
// compare_checksums judged it (CompareSpec::keep_records) under the reading the first divergence uses
// (proof::fault_reading), with the injected step, what every view found (proof::locate_first_divergence
// via the verdict), the parallel run (or its anchored replay) against its derived tolerance, and the
// free-running drift (drift.json's content, derived by the gate; docs/equivalence.md §anchored).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "evidence/checksums.h"
#include "evidence/compare.h"
#include "evidence/faults.h"
#include "plan/promise.h"
#include "proof/equivalence.h"
#include "proof/first_divergence.h"
#include "report/views.h"

namespace sp::report {
namespace {

// The unit a tensor belongs to (docs/architecture.md §Units): embed, layers.i, head; loss stays loss.
std::string unit_of(const std::string& tensor) {
  if (tensor == "loss" || tensor == evidence::kScalerTensor) return tensor;
  if (tensor.rfind("model.embed_tokens", 0) == 0) return "embed";
  if (tensor.rfind("model.layers.", 0) == 0) {
    const size_t dot = tensor.find('.', 13);
    return "layers." + tensor.substr(13, dot == std::string::npos ? std::string::npos : dot - 13);
  }
  return "head";
}

json divergence_json(const evidence::Divergence& d) {
  return {{"step", d.step},    {"phase", d.phase},         {"tensor", d.tensor},
          {"rel", d.rel_l2},   {"tolerance", d.tolerance}, {"got", d.got_l2},
          {"want", d.want_l2}, {"reason", d.reason},       {"text", d.to_string()}};
}

// One comparison's records (CompareSpec::keep_records) as the chart draws them: a row per (phase,
// tensor) in file order with the relative L2 difference at every step (null: no record, or not finite),
// the steps where it left the promised class, the first record that differs at all and the first out of
// class (the comparison's own divergence), and the tolerances that applied (none under a bitwise promise).
json error_series(std::string_view role, const RunDir& run, const RunDir& against, const evidence::Comparison& c,
                  const evidence::Tolerances& tol, bool anchored) {
  std::vector<int64_t> steps;
  for (const evidence::RecordDifference& r : c.record_differences) steps.push_back(r.diff.step);
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  std::map<int64_t, size_t> column;
  for (size_t i = 0; i < steps.size(); ++i) column[steps[i]] = i;
  std::set<std::pair<std::string, std::string>> tensors;
  for (const evidence::RecordDifference& r : c.record_differences) tensors.insert({r.diff.phase, r.diff.tensor});
  const bool by_unit = static_cast<int64_t>(tensors.size() * steps.size()) > kMaxDivergenceValues;

  struct Row {
    std::string phase, name;
    std::vector<double> rel;      // −1: no record or not finite
    std::vector<int64_t> out;     // steps out of class
    int64_t first_mismatch = -1;  // first step not bitwise equal
  };
  std::vector<Row> rows;
  std::map<std::pair<std::string, std::string>, size_t> index;
  const auto row_of = [&](const evidence::Divergence& d) { return by_unit ? unit_of(d.tensor) : d.tensor; };
  for (const evidence::RecordDifference& r : c.record_differences) {
    const evidence::Divergence& d = r.diff;
    auto [it, added] = index.try_emplace({d.phase, row_of(d)}, rows.size());
    if (added) rows.push_back({d.phase, row_of(d), std::vector<double>(steps.size(), -1.0), {}, -1});
    Row& row = rows[it->second];
    const size_t col = column[d.step];
    if (std::isfinite(d.rel_l2)) row.rel[col] = std::max(row.rel[col], d.rel_l2);
    if (r.out_of_class() && (row.out.empty() || row.out.back() != d.step)) row.out.push_back(d.step);
    if (!r.bitwise && row.first_mismatch < 0) row.first_mismatch = d.step;
  }
  json rows_j = json::array();
  for (const Row& row : rows) {
    json rel = json::array();
    for (double x : row.rel) rel.push_back(x < 0 ? json(nullptr) : json(x));
    rows_j.push_back({{"phase", row.phase},
                      {"name", row.name},
                      {"rel", rel},
                      {"out", row.out},
                      {"first_mismatch", row.first_mismatch < 0 ? json(nullptr) : json(row.first_mismatch)}});
  }
  const auto first = [&](const std::vector<evidence::Divergence>& list) {
    if (list.empty()) return json(nullptr);
    json j = divergence_json(list.front());
    j["row"] = row_of(list.front());
    return j;
  };
  const bool bitwise = c.promised == evidence::Equivalence::kBitwise;
  return {
      {"role", role},
      {"run", run.name},
      {"against", against.name},
      {"file", run.label(evidence::kChecksumsFile)},
      {"against_file", against.label(evidence::kChecksumsFile)},
      {"promised", evidence::equivalence_name(c.promised)},
      {"class", evidence::equivalence_name(c.verdict)},
      {"anchored", anchored},
      {"summary", c.describe()},
      {"problems", c.problems},
      {"tolerance",
       bitwise ? json(nullptr)
               : json{{"loss", tol.loss}, {"param", tol.param}, {"grad", anchored ? tol.grad_first : tol.grad_later}}},
      {"records", c.record_differences.size()},
      {"rows_are", by_unit ? "units (max over tensors)" : "tensors"},
      {"steps", steps},
      {"rows", rows_j},
      {"first_mismatch", first(c.first_mismatch)},
      {"first_divergent", first(c.divergence)}};
}

}  // namespace

View gate_view(const Result<proof::ProofVerdict>& verdict, const std::vector<RunDir>& stages) {
  View v{.id = "gate",
         .title = "Gate: every criterion, measured against its threshold",
         .files = {std::string(evidence::kProveFile), std::string(evidence::kContractFile),
                   std::string(evidence::kSealFile)}};
  for (const RunDir& stage : stages) v.files.push_back(stage.rel);
  if (!verdict.ok()) {
    v.problems.push_back("the gate cannot be derived: " + verdict.status().message());
    return v;
  }
  json criteria = json::array();
  for (const proof::Criterion& c : verdict->gate.criteria) criteria.push_back(c.to_json());
  const proof::Detection* first = verdict->divergence.earliest();
  v.data = {{"verdict", verdict->gate.passed() ? "PASS" : "FAIL"},
            {"criteria", criteria},
            {"first_divergence", verdict->divergence.line()},
            {"first", first == nullptr ? json(nullptr) : first->to_json()},
            {"notes", verdict->notes},
            {"derived_by",
             fmt::format("proof::derive_gate, as `shardproof verify DIR` ({} holds the same)", evidence::kGateFile)}};
  return v;
}

View divergence_view(const proof::ProofBundle& bundle, const Result<proof::ProofVerdict>& verdict) {
  View v{.id = "divergence",
         .title = "Divergence: the fault run against the reference, per tensor and step",
         .files = {std::string(evidence::kProveFile), fmt::format("{} (re-derived)", evidence::kFirstDivergenceFile)}};
  const evidence::FaultSpec& fault = bundle.fault();
  const evidence::FaultInfo& info = evidence::fault_info(fault.kind);
  json d = {{"fault", fault.to_string()},
            {"checkpoint_step", bundle.checkpoint_step()},
            {"injected_step", fault.step},
            {"injected_rank", fault.rank},
            {"breaks", std::string(info.breaks)},
            {"expected_view", std::string(evidence::view_name(info.expected_view))},
            {"expectation", std::string(info.expectation)}};
  if (const json* st = bundle.stage(evidence::kFaultStage); st != nullptr && st->value("exit_code", 0) != 0)
    v.notes.push_back(fmt::format("fault: the stage ended with exit {} ({}); its evidence stops there",
                                  st->value("exit_code", 0), st->value("error", std::string("?"))));
  if (verdict.ok()) {
    const proof::FirstDivergence& fd = verdict->divergence;
    d["line"] = fd.line();
    d["first"] = fd.earliest() == nullptr ? json(nullptr) : fd.earliest()->to_json();
    json views = json::array();
    for (const proof::Detection& det : fd.views) views.push_back(det.to_json());
    d["views"] = views;
    json prop = json::array();
    for (const auto& [s, n] : fd.propagation) prop.push_back({{"step", s}, {"records", n}});
    d["propagation"] = prop;
    // drift.json's content (non-bitwise configurations): the free-running parallel run's drift per step.
    d["drift"] = verdict->drift;
    d["drift_file"] = evidence::kDriftFile;
    if (!verdict->drift.is_null()) v.files.push_back(fmt::format("{} (re-derived)", evidence::kDriftFile));
  }
  auto config = config::RunConfig::from_json(bundle.contract().value("config", json::object()));
  if (!config.ok()) {
    v.problems.push_back(fmt::format("{}: {}", evidence::kContractFile, config.status().message()));
    v.data = std::move(d);
    return v;
  }
  // The class the contract promises and the tolerances the gate reads the fault with (docs/equivalence.md).
  const bool bitwise = plan::promised_class(*config) == evidence::Equivalence::kBitwise;
  const evidence::Tolerances tol = plan::tolerances_for(*config);
  d["promised"] = evidence::equivalence_name(plan::promised_class(*config));
  d["tolerances"] = {
      {"loss", tol.loss}, {"param", tol.param}, {"grad_first", tol.grad_first}, {"grad_later", tol.grad_later}};
  const auto run_dir = [&](std::string_view stage) {
    const json* st = bundle.stage(stage);
    return RunDir{.name = std::string(stage),
                  .path = bundle.paths().stage(stage).root(),
                  .rel = std::string(stage) + "/",
                  .expected = st != nullptr && st->value("exit_code", -1) == 0};
  };
  json series = json::array();
  // The fault run, read as the first divergence reads it.
  proof::FaultReading reading = proof::fault_reading(bundle, *config, bitwise, tol);
  reading.spec.keep_records = true;
  const RunDir numbers = run_dir(reading.numbers_stage), against = run_dir(reading.against_stage);
  v.files.push_back(numbers.label(evidence::kChecksumsFile));
  v.files.push_back(against.label(evidence::kChecksumsFile));
  if (auto c = evidence::compare_checksums(reading.numbers.checksums(), reading.against.checksums(), reading.spec);
      c.ok())
    series.push_back(error_series("fault", numbers, against, *c, tol, reading.replayed));
  else
    v.unreadable(numbers, evidence::kChecksumsFile, c.status());
  // The parallel run (or, not bitwise, its anchored replay: every step from the reference's state) in
  // the class its contract promises, as the gate's gradient criterion reads it.
  const RunDir par = run_dir(bitwise || bundle.anchors().empty() ? evidence::kParallelStage : evidence::kAnchoredStage);
  const RunDir ref = run_dir(evidence::kReferenceStage);
  v.files.push_back(par.label(evidence::kChecksumsFile));
  if (auto e = proof::compare_runs(par.paths(), ref.paths(), /*keep_records=*/true); e.ok()) {
    series.push_back(error_series("parallel", par, ref, e->comparison, tol, e->anchored));
    series.back()["summary"] = e->describe();
  } else {
    v.unreadable(par, evidence::kChecksumsFile, e.status());
  }
  d["series"] = series;
  v.data = std::move(d);
  return v;
}

}  // namespace sp::report
