#include "proof/gate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "evidence/bundle_paths.h"
#include "proof/criteria.h"

namespace sp::proof {

bool Gate::passed() const {
  if (criteria.empty()) return false;
  for (const Criterion& c : criteria)
    if (c.required && !c.passed) return false;
  return true;
}

nlohmann::json Gate::to_json() const {
  nlohmann::json j = {{"format_version", evidence::kGateFormatVersion},
                      {"verdict", passed() ? "PASS" : "FAIL"},
                      {"criteria", nlohmann::json::array()}};
  for (const Criterion& c : criteria) j["criteria"].push_back(c.to_json());
  return j;
}

nlohmann::json Criterion::to_json() const {
  return {{"name", name},           {"passed", passed},     {"required", required}, {"measured", measured},
          {"threshold", threshold}, {"evidence", evidence}, {"detail", detail}};
}

// The lab's header of summary.md: section, mechanism, and each observation linked to its report view.
static std::string lab_markdown(const nlohmann::json& lab) {
  if (!lab.is_object()) return "";
  std::string s = fmt::format(
      "Lab **{}**, §{} {}. {}\n\nWhat to observe (each with claims that `{}` checks against "
      "this bundle):\n\n",
      lab.value("key", "?"), lab.value("section", "?"), lab.value("title", "?"), lab.value("mechanism", ""),
      lab.value("check", "shardproof lab check KEY DIR"));
  int n = 0;
  for (const nlohmann::json& o : lab.value("observations", nlohmann::json::array()))
    s += fmt::format("{}. {} ([view]({}#view-{}))\n", ++n, o.value("text", ""), evidence::kReportFile,
                     o.value("view", "gate"));
  return s + "\n";
}

std::string Gate::summary_markdown(const std::string& title, const std::vector<std::string>& notes,
                                   const nlohmann::json& lab) const {
  std::string s = fmt::format("# {}\n\n{}**Verdict: {}**\n\n", title, lab_markdown(lab), passed() ? "PASS" : "FAIL");
  s += fmt::format("Charts of every view: [{0}]({0}) (`shardproof report DIR` regenerates it).\n\n",
                   evidence::kReportFile);
  s += criteria_markdown();
  if (!notes.empty()) {
    s += "\n## Notes\n\n";
    for (const auto& n : notes) s += "- " + n + "\n";
  }
  return s;
}

std::string Gate::criteria_markdown() const {
  std::string s = "| criterion | result | measured | threshold | evidence |\n|---|---|---|---|---|\n";
  for (const Criterion& c : criteria)
    s += fmt::format("| {} | {} | {} | {} | `{}` |\n", c.name, !c.required ? "info" : (c.passed ? "pass" : "**FAIL**"),
                     c.measured, c.threshold, c.evidence);
  bool any = false;
  for (const Criterion& c : criteria)
    if (!c.detail.empty()) {
      if (!any) s += "\n## Details\n\n";
      any = true;
      s += fmt::format("- **{}**: {}\n", c.name, c.detail);
    }
  return s;
}

namespace {

// Every spelling of the bundle's directory a reader may have put into a message (as given, absolute,
// resolved), longest first, each with its trailing '/'.
std::vector<std::string> bundle_prefixes(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<std::string> out;
  for (fs::path p : {fs::path(dir), fs::absolute(dir, ec), fs::weakly_canonical(dir, ec)}) {
    std::string s = p.lexically_normal().string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    if (!s.empty() && s != "." && std::find(out.begin(), out.end(), s + "/") == out.end()) out.push_back(s + "/");
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

// `text` with the bundle's directory removed from every path in it: a verdict names files relative to the
// bundle, so a bundle copied or moved elsewhere derives the same bytes (docs/report.md).
void relative_to_bundle(std::string& text, const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes)
    for (size_t at = text.find(p); at != std::string::npos; at = text.find(p, at)) text.erase(at, p.size());
}

}  // namespace

Result<ProofVerdict> derive_gate(const std::string& dir) {
  SP_ASSIGN_OR_RETURN(const ProofBundle bundle, ProofBundle::open(dir));
  SP_ASSIGN_OR_RETURN(const GateContext context, GateContext::make(bundle));
  ProofVerdict v;
  for (const CriterionRule& rule : gate_criteria()) v.gate.criteria.push_back(rule.check(context));
  v.divergence = context.divergence;
  const std::vector<std::string> prefixes = bundle_prefixes(dir);
  for (Criterion& c : v.gate.criteria)
    for (std::string* text : {&c.measured, &c.threshold, &c.evidence, &c.detail}) relative_to_bundle(*text, prefixes);
  for (Detection& d : v.divergence.views)
    for (std::string* text : {&d.detail, &d.evidence, &d.tensor}) relative_to_bundle(*text, prefixes);
  if (!context.bitwise && context.parallel_vs_reference.ok()) {
    const evidence::Comparison& c = context.parallel_vs_reference->comparison;
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& [s, d] : c.drift_per_step)
      steps.push_back({{"step", s}, {"max_rel_diff", std::isfinite(d) ? nlohmann::json(d) : nlohmann::json()}});
    // The free-running evals' relative difference (information), and the tolerance the eval criterion
    // applies to the reference's final state evaluated on the parallel topology.
    const auto par = final_eval(bundle.paths().parallel()), ref = final_eval(bundle.paths().reference());
    const double eval_difference = par && ref ? std::fabs(*par - *ref) / std::fabs(*ref) : NAN;
    v.drift = {{"format_version", 2},
               {"run", evidence::kParallelStage},
               {"reference", evidence::kReferenceStage},
               {"max_loss_drift", c.max_loss_drift},
               {"eval_difference", std::isfinite(eval_difference) ? nlohmann::json(eval_difference) : nlohmann::json()},
               {"eval_tolerance", context.eval_tolerance},
               {"steps", steps}};
  }
  const evidence::FaultSpec& fault = bundle.fault();
  v.notes.push_back(fmt::format("fault: {} — {}", fault.to_string(), evidence::fault_info(fault.kind).breaks));
  v.notes.push_back(v.divergence.line());
  v.title = bundle.prove().value("title", std::string("shardproof prove"));
  v.lab = bundle.prove().value("lab", nlohmann::json());
  return v;
}

std::vector<std::pair<std::string, std::string>> derived_files(const ProofVerdict& v) {
  std::vector<std::pair<std::string, std::string>> out = {
      {std::string(evidence::kFirstDivergenceFile), v.divergence.to_json().dump(2) + "\n"},
      {std::string(evidence::kGateFile), v.gate.to_json().dump(2) + "\n"},
      {std::string(evidence::kSummaryFile), v.gate.summary_markdown(v.title, v.notes, v.lab)}};
  if (!v.drift.is_null()) out.push_back({std::string(evidence::kDriftFile), v.drift.dump(2) + "\n"});
  return out;
}

}  // namespace sp::proof
