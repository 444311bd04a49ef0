#include "evidence/gate.h"

#include <fmt/format.h>

namespace sp::evidence {

bool Gate::passed() const {
  if (criteria.empty()) return false;
  for (const Criterion& c : criteria)
    if (c.required && !c.passed) return false;
  return true;
}

Criterion& Gate::add(std::string name, bool passed, std::string measured, std::string threshold, std::string evidence,
                     std::string detail) {
  criteria.push_back({std::move(name), passed, true, std::move(measured), std::move(threshold), std::move(evidence),
                      std::move(detail)});
  return criteria.back();
}

nlohmann::json Gate::to_json() const {
  nlohmann::json j = {{"format_version", 1}, {"verdict", passed() ? "PASS" : "FAIL"}, {"criteria", nlohmann::json::array()}};
  for (const Criterion& c : criteria)
    j["criteria"].push_back({{"name", c.name}, {"passed", c.passed}, {"required", c.required},
                             {"measured", c.measured}, {"threshold", c.threshold}, {"evidence", c.evidence},
                             {"detail", c.detail}});
  return j;
}

std::string Gate::summary_markdown(const std::string& title, const std::vector<std::string>& notes) const {
  std::string s = fmt::format("# {}\n\n**Verdict: {}**\n\n", title, passed() ? "PASS" : "FAIL");
  s += "Charts of every view: [report.html](report.html) (`shardproof report DIR` regenerates it).\n\n";
  s += "| criterion | result | measured | threshold | evidence |\n|---|---|---|---|---|\n";
  for (const Criterion& c : criteria)
    s += fmt::format("| {} | {} | {} | {} | `{}` |\n", c.name,
                     !c.required ? "info" : (c.passed ? "pass" : "**FAIL**"), c.measured, c.threshold, c.evidence);
  bool any = false;
  for (const Criterion& c : criteria)
    if (!c.detail.empty()) {
      if (!any) s += "\n## Details\n\n";
      any = true;
      s += fmt::format("- **{}**: {}\n", c.name, c.detail);
    }
  if (!notes.empty()) {
    s += "\n## Notes\n\n";
    for (const auto& n : notes) s += "- " + n + "\n";
  }
  return s;
}

}  // namespace sp::evidence
