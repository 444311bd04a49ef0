// The views only a proof bundle has (views.h): the gate (parallel::derive_gate, the function `verify`
// runs) and the divergence of the fault run from the reference, per tensor and step
// (evidence::checksum_differences, the records compare_checksums classifies), with the injected step,
// the first divergence every view found (parallel::locate_first_divergence via the verdict) and, for a
// configuration proved within tolerance (TP, fast reductions), the parallel run's error against its
// derived tolerance (docs/equivalence.md).
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "evidence/compare.h"
#include "evidence/faults.h"
#include "report/views.h"

namespace sp::report {
namespace {

// The unit a tensor belongs to (docs/architecture.md §Units): embed, layers.i, head; loss stays loss.
std::string unit_of(const std::string& tensor) {
  if (tensor == "loss") return "loss";
  if (tensor.rfind("model.embed_tokens", 0) == 0) return "embed";
  if (tensor.rfind("model.layers.", 0) == 0) {
    const size_t dot = tensor.find('.', 13);
    return "layers." + tensor.substr(13, dot == std::string::npos ? std::string::npos : dot - 13);
  }
  return "head";
}

json divergence_json(const evidence::Divergence& d) {
  return {{"step", d.step},           {"phase", d.phase}, {"tensor", d.tensor}, {"rel", d.rel_l2},
          {"tolerance", d.tolerance}, {"got", d.got_l2},  {"want", d.want_l2},  {"text", d.to_string()}};
}

// One run's checksums against the reference's: a row per (phase, tensor) in file order with the
// relative L2 difference at every step (null: no record, or not finite), the steps where it left its
// class, and the first record that differs at all and the first out of class.
json error_series(const RunDir& run, const RunDir& ref, View& v) {
  v.files.push_back(run.rel + "checksums.jsonl");
  auto diffs = evidence::checksum_differences(run.path + "/checksums.jsonl", ref.path + "/checksums.jsonl");
  if (!diffs.ok()) {
    v.unreadable(run, "checksums.jsonl", diffs.status());
    return nullptr;
  }
  std::vector<int64_t> steps;
  for (const evidence::RecordDifference& r : *diffs) steps.push_back(r.diff.step);
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  std::map<int64_t, size_t> column;
  for (size_t i = 0; i < steps.size(); ++i) column[steps[i]] = i;

  size_t rows_per_tensor = 0;
  {
    std::map<std::pair<std::string, std::string>, int> seen;
    for (const evidence::RecordDifference& r : *diffs) seen[{r.diff.phase, r.diff.tensor}] = 1;
    rows_per_tensor = seen.size();
  }
  const bool by_unit = static_cast<int64_t>(rows_per_tensor * steps.size()) > kMaxDivergenceValues;

  struct Row {
    std::string phase, name;
    std::vector<double> rel;      // −1: no record or not finite
    std::vector<int64_t> out;     // steps out of class
    int64_t first_mismatch = -1;  // first step not bitwise equal
  };
  std::vector<Row> rows;
  std::map<std::pair<std::string, std::string>, size_t> index;
  json first_out = nullptr, first_mismatch = nullptr;
  bool all_bitwise = true, all_within = true;
  for (const evidence::RecordDifference& r : *diffs) {
    const evidence::Divergence& d = r.diff;
    const std::string name = by_unit ? unit_of(d.tensor) : d.tensor;
    auto [it, added] = index.try_emplace({d.phase, name}, rows.size());
    if (added) rows.push_back({d.phase, name, std::vector<double>(steps.size(), -1.0), {}, -1});
    Row& row = rows[it->second];
    const size_t c = column[d.step];
    if (std::isfinite(d.rel_l2)) row.rel[c] = std::max(row.rel[c], d.rel_l2);
    if (!r.within && (row.out.empty() || row.out.back() != d.step)) row.out.push_back(d.step);
    if (!r.bitwise && row.first_mismatch < 0) row.first_mismatch = d.step;
    if (!r.bitwise && first_mismatch.is_null()) (first_mismatch = divergence_json(d))["row"] = name;
    if (!r.within && first_out.is_null()) (first_out = divergence_json(d))["row"] = name;
    all_bitwise = all_bitwise && r.bitwise;
    all_within = all_within && r.within;
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
  const char* cls = !all_within ? "divergent" : all_bitwise ? "bitwise-equal" : "within-tolerance";
  return {{"run", run.name},
          {"against", ref.name},
          {"file", run.rel + "checksums.jsonl"},
          {"class", cls},
          {"records", diffs->size()},
          {"rows_are", by_unit ? "units (max over tensors)" : "tensors"},
          {"steps", steps},
          {"rows", rows_j},
          {"first_out_of_class", first_out},
          {"first_mismatch", first_mismatch}};
}

}  // namespace

View gate_view(const Result<parallel::ProofVerdict>& verdict) {
  View v{.id = "gate",
         .title = "Gate: every criterion, measured against its threshold",
         .files = {"prove.json", "contract.json", "bundle.sha256", "reference/", "parallel/", "fault/", "recovery/"}};
  if (!verdict.ok()) {
    v.problems.push_back("the gate cannot be derived: " + verdict.status().message());
    return v;
  }
  json criteria = json::array();
  for (const evidence::Criterion& c : verdict->gate.criteria)
    criteria.push_back({{"name", c.name},
                        {"passed", c.passed},
                        {"required", c.required},
                        {"measured", c.measured},
                        {"threshold", c.threshold},
                        {"evidence", c.evidence},
                        {"detail", c.detail}});
  const parallel::Detection* first = verdict->divergence.earliest();
  v.data = {{"verdict", verdict->gate.passed() ? "PASS" : "FAIL"},
            {"criteria", criteria},
            {"first_divergence", verdict->divergence.line()},
            {"first", first == nullptr ? json(nullptr) : first->to_json()},
            {"notes", verdict->notes},
            {"derived_by", "parallel::derive_gate, as `shardproof verify DIR` (gate.json holds the same)"}};
  return v;
}

View divergence_view(const std::string& bundle, const json& prove, const Result<parallel::ProofVerdict>& verdict) {
  View v{.id = "divergence",
         .title = "Divergence: the fault run against the reference, per tensor and step",
         .files = {"prove.json", "first_divergence.json (re-derived)"}};
  const RunDir ref{.name = "reference", .path = bundle + "/reference", .rel = "reference/"};
  const json* fault_stage = parallel::find_stage(prove, "fault");
  const RunDir fault{.name = "fault",
                     .path = bundle + "/fault",
                     .rel = "fault/",
                     .expected = fault_stage != nullptr && fault_stage->value("exit_code", -1) == 0};
  const RunDir par{.name = "parallel", .path = bundle + "/parallel", .rel = "parallel/"};
  v.files.push_back("reference/checksums.jsonl");
  json d = {{"fault", prove.value("fault", "")}, {"checkpoint_step", prove.value("checkpoint_step", int64_t{0})}};
  if (auto spec = evidence::parse_fault(prove.value("fault", std::string())); spec.ok()) {
    const evidence::FaultInfo& info = evidence::fault_info(spec->kind);
    d["injected_step"] = spec->step;
    d["injected_rank"] = spec->rank;
    d["breaks"] = std::string(info.breaks);
    d["expected_view"] = std::string(evidence::view_name(info.expected_view));
    d["expectation"] = std::string(info.expectation);
  } else {
    v.problems.push_back("prove.json: fault: " + spec.status().message());
  }
  const evidence::Tolerances tol;
  d["tolerances"] = {
      {"loss", tol.loss}, {"param", tol.param}, {"grad_first", tol.grad_first}, {"grad_later", tol.grad_later}};
  if (fault_stage != nullptr && fault_stage->value("exit_code", 0) != 0)
    v.notes.push_back(fmt::format("fault: the stage ended with exit {} ({}); its evidence stops there",
                                  fault_stage->value("exit_code", 0), fault_stage->value("error", std::string("?"))));
  if (verdict.ok()) {
    const parallel::FirstDivergence& fd = verdict->divergence;
    d["line"] = fd.line();
    d["first"] = fd.earliest() == nullptr ? json(nullptr) : fd.earliest()->to_json();
    json views = json::array();
    for (const parallel::Detection& det : fd.views) views.push_back(det.to_json());
    d["views"] = views;
    json prop = json::array();
    for (const auto& [s, n] : fd.propagation) prop.push_back({{"step", s}, {"records", n}});
    d["propagation"] = prop;
  }
  // The parallel run's class decides how strictly the fault run is read (docs/prove.md): after a
  // bitwise-equal parallel run any changed bit diverges, otherwise a record out of tolerance does.
  json par_series = error_series(par, ref, v), fault_series = error_series(fault, ref, v);
  const bool bitwise = !par_series.is_null() && par_series["class"] == "bitwise-equal";
  json series = json::array();
  if (!fault_series.is_null()) {
    fault_series["read_as"] = bitwise ? "bitwise" : "tolerance";
    fault_series["first_divergent"] = fault_series[bitwise ? "first_mismatch" : "first_out_of_class"];
    series.push_back(std::move(fault_series));
  }
  if (!par_series.is_null()) {
    par_series["read_as"] = "tolerance";
    par_series["first_divergent"] = par_series["first_out_of_class"];
    series.push_back(std::move(par_series));
  }
  d["series"] = series;
  v.data = std::move(d);
  return v;
}

}  // namespace sp::report
