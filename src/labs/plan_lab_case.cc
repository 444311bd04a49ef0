#include "labs/plan_lab_case.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"

namespace sp::labs {

std::string PlanLabCase::plan_file() const { return dir() + "/" + std::string(evidence::kPlanFile); }

std::vector<PlanLabCase> plan_lab_cases(const PlanLabSpec& spec) {
  std::vector<PlanLabCase> cases;
  for (const std::string& cluster : spec.clusters)
    for (const std::string& placement : spec.placements) cases.push_back({cluster, placement});
  return cases;
}

namespace {

// The inputs plan.json says it was evaluated with must be the lab's; the last difference found is the problem.
std::string inputs_problem(const PlanLabSpec& spec, const PlanLabCase& c, const nlohmann::json& j) {
  std::string problem;
  const nlohmann::json& in = j.at("inputs");
  const nlohmann::json& st = in.at("strategy");
  const std::vector<std::pair<std::string, std::string>> expected = {{"kind", "plan"},
                                                                     {"inputs.cluster.name", c.cluster},
                                                                     {"inputs.model.name", spec.model},
                                                                     {"inputs.strategy.axis_order", c.placement}};
  const std::vector<std::string> actual = {
      j.at("kind").get<std::string>(), in.at("cluster").at("name").get<std::string>(),
      in.at("model").at("name").get<std::string>(), st.at("axis_order").get<std::string>()};
  for (size_t i = 0; i < expected.size(); ++i)
    if (actual[i] != expected[i].second)
      problem = fmt::format("{}: {} is '{}', the lab's case has '{}'", c.plan_file(), expected[i].first, actual[i],
                            expected[i].second);
  const plan::Strategy& s = spec.parsed;
  if (st.at("dp").get<int>() != s.dp || st.at("tp").get<int>() != s.tp || st.at("pp").get<int>() != s.pp ||
      st.at("zero").get<int>() != s.zero)
    problem = fmt::format("{}: strategy {} is not the lab's {}", c.plan_file(), st.at("name").get<std::string>(),
                          spec.strategy);
  if (in.at("cluster").at("nodes").get<int>() != spec.nodes ||
      in.at("global_batch").get<int64_t>() != spec.global_batch)
    problem = fmt::format("{}: nodes or global batch are not the lab's ({}, {})", c.plan_file(), spec.nodes,
                          spec.global_batch);
  return problem;
}

// The figures the criteria judge: the step, the memory and the placement's links and warnings.
void read_figures(const nlohmann::json& j, PlanLabRecord& r) {
  const nlohmann::json& step = j.at("step");
  r.step_s = step.at("seconds").get<double>();
  r.pass_comm_s = step.at("pass_comm_seconds").get<double>();
  r.mfu = step.at("mfu").get<double>();
  r.dominant = step.at("dominant_comm").get<std::string>();
  const size_t on = r.dominant.find(" on ");
  r.dominant_axis = r.dominant.substr(0, r.dominant.find(' '));
  r.dominant_link = on == std::string::npos ? "" : r.dominant.substr(on + 4);
  const nlohmann::json& mem = j.at("memory");
  r.fits = mem.at("fits").get<bool>();
  r.peak_bytes = mem.at("peak_bytes").get<int64_t>();
  r.limit_bytes = mem.at("limit_bytes").get<int64_t>();
  const nlohmann::json& placement = j.at("placement");
  r.warnings = placement.at("warnings").get<std::vector<std::string>>();
  r.tp_crosses_nodes = placement.at("links").at("tp").at("crosses_nodes").get<bool>();
  r.tp_link = placement.at("links").at("tp").at("link").get<std::string>();
}

// A value no plan can hold (issue 45: an edited plan.json with "mfu": 7.0 passed every criterion): a time
// that is negative or not finite, a utilization outside [0, 1], a negative byte count. "" when none.
std::string impossible_value(const nlohmann::json& j, const PlanLabCase& c) {
  for (const auto& [k, v] : j.at("step").items()) {
    if (!v.is_number()) continue;
    const double x = v.get<double>();
    const bool utilization = k == "mfu" || k == "hfu";
    if (!std::isfinite(x) || x < 0 || (utilization && x > 1))
      return fmt::format(
          "{}: step.{} is {}, {}", c.plan_file(), k, v.dump(),
          utilization ? "outside [0, 1]: a utilization above 100 % is impossible" : "not a finite non-negative number");
  }
  for (const char* k : {"peak_bytes", "limit_bytes"})
    if (!j.at("memory").at(k).is_number() || j.at("memory").at(k).get<double>() < 0)
      return fmt::format("{}: memory.{} is {}, not a non-negative byte count", c.plan_file(), k,
                         j.at("memory").at(k).dump());
  return "";
}

}  // namespace

PlanLabRecord read_plan_lab_case(const PlanLabSpec& spec, const PlanLabCase& c, const std::string& dir) {
  PlanLabRecord r;
  r.c = c;
  const std::string path = dir + "/" + c.plan_file();
  if (!path_exists(path)) {
    r.problem = c.plan_file() + " does not exist";
    return r;
  }
  if (!path_exists(dir + "/" + c.dir() + "/" + std::string(evidence::kReportFile))) {
    r.problem = c.dir() + "/" + std::string(evidence::kReportFile) + " does not exist";
    return r;
  }
  Result<nlohmann::json> j = read_json_file(path);
  if (!j.ok()) {
    r.problem = j.status().message();
    return r;
  }
  try {  // a field of the wrong type or missing: the case was not evaluated as the lab says
    r.problem = inputs_problem(spec, c, *j);
    read_figures(*j, r);
    if (const std::string bad = impossible_value(*j, c); !bad.empty()) r.problem = bad;
    if (!(std::isfinite(r.step_s) && r.step_s > 0))
      r.problem = fmt::format("{}: step.seconds is {}", c.plan_file(), r.step_s);
    r.plan = std::move(j).value();
  } catch (const nlohmann::json::exception& e) {
    r.problem = fmt::format("{}: {}", c.plan_file(), e.what());
  }
  return r;
}

}  // namespace sp::labs
