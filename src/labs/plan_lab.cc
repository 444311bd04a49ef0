// Running a plan lab (labs/plan_lab.h): the cases' queries, the planner's evaluation of each written as
// `plan --out` writes it, then the derived gate.json and summary.md (labs/plan_lab_criteria.h).
#include "labs/plan_lab.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/file_io.h"
#include "core/log.h"
#include "evidence/bundle_paths.h"
#include "labs/plan_lab_criteria.h"
#include "plan/strategy.h"
#include "planner/cluster.h"
#include "planner/model_shape.h"
#include "report/render.h"

namespace sp::labs {
namespace {

void print(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

// The lab's files as the gate writes them: relative name → bytes.
std::vector<std::pair<std::string, std::string>> derived_files(const Lab& lab, const PlanLabContext& context,
                                                               const proof::Gate& gate) {
  const std::string heading = fmt::format("{} §{} {}", lab.key, lab.section, lab.title);
  return {{std::string(evidence::kGateFile), gate.to_json().dump(2) + "\n"},
          {std::string(evidence::kSummaryFile), plan_lab_summary(context, heading, gate)}};
}

// The gate's rows, then the verdict; `differing` derived files (verify) make it a FAIL whatever the gate says.
std::string verdict_text(const proof::Gate& gate, int differing = 0) {
  std::string out;
  for (const proof::Criterion& c : gate.criteria) {
    out += fmt::format("  {:<5} {}: {}\n", !c.required ? "info" : (c.passed ? "pass" : "FAIL"), c.name, c.measured);
    if (!c.detail.empty() && c.required && !c.passed) out += "        " + c.detail + "\n";
  }
  if (differing > 0)
    return out + fmt::format("verdict: FAIL: {} derived file(s) differ from the gate the files give (gate: {})\n",
                             differing, gate.passed() ? "PASS" : "FAIL");
  return out + fmt::format("verdict: {}\n", gate.passed() ? "PASS" : "FAIL");
}

}  // namespace

Result<planner::PlanQuery> plan_lab_query(const Lab& lab, const PlanLabCase& c, const std::string& root) {
  const PlanLabSpec& p = lab.plan;
  const auto context = [&](const Status& s) { return s.with_context(fmt::format("lab {}", lab.key)); };
  const std::string dir = planner::clusters_dir(root);
  if (!path_exists(dir + "/" + c.cluster + ".toml")) {
    std::string presets;
    for (const std::string& n : planner::cluster_preset_names(dir)) presets += (presets.empty() ? "" : ", ") + n;
    return invalid_argument("lab {}: 'clusters' names '{}', which is not a cluster preset in {}", lab.key, c.cluster,
                            dir)
        .with_hint((presets.empty() ? "that folder has no presets" : "the presets are " + presets) +
                   " (`shardproof plan list`; docs/formats/cluster.md)");
  }
  Result<planner::ClusterSpec> cluster = planner::load_cluster(dir, c.cluster);
  if (!cluster.ok()) return context(cluster.status());
  cluster = planner::with_nodes(*cluster, p.nodes);
  if (!cluster.ok()) return context(cluster.status());
  Result<planner::ModelShape> shape = planner::named_shape(p.model);
  if (!shape.ok()) return context(shape.status());
  // The engine's defaults around a named shape, as `shardproof plan` takes them (docs/plan.md §10), with the
  // lab's strategy and the case's placement; through the config reader, so the placement is checked as in a
  // TOML file.
  config::RunConfig rc = planner::run_config_around(shape->engine_counterpart(), c.placement);
  rc.train.global_batch = p.global_batch;
  plan::apply(p.parsed, rc);
  Result<config::RunConfig> config = config::RunConfig::from_json(rc.to_json());
  if (!config.ok()) return context(config.status());
  return planner::PlanQuery{
      .cluster = *cluster, .config = *config, .dtype = "fp32", .efficiency = planner::kDefaultGemmEfficiency};
}

Status validate_plan_lab(const Lab& lab, const std::string& root) {
  if (!lab.available)
    return failed_precondition("lab {} (§{} {}) is not available: {}", lab.key, lab.section, lab.title,
                               lab.unavailable_reason);
  for (const PlanLabCase& c : plan_lab_cases(lab.plan)) {
    SP_ASSIGN_OR_RETURN(const planner::PlanQuery q, plan_lab_query(lab, c, root));
    if (Result<planner::PlanEvaluation> e = planner::evaluate_plan(q); !e.ok())
      return e.status().with_context(fmt::format("lab {}, case {}", lab.key, c.dir()));
  }
  return Status();
}

std::map<std::string, nlohmann::json> plan_lab_derivation(const Lab& lab, const std::string& root) {
  std::map<std::string, nlohmann::json> out;
  for (const PlanLabCase& c : plan_lab_cases(lab.plan)) {
    Result<planner::PlanQuery> q = plan_lab_query(lab, c, root);
    if (!q.ok()) continue;
    Result<planner::PlanEvaluation> e = planner::evaluate_plan(*q);
    if (e.ok()) out[c.dir()] = nlohmann::json::parse(planner::plan_evaluation_to_json(*q, *e).dump(1));
  }
  return out;
}

std::vector<std::string> plan_lab_edited_cases(const Lab& lab, const std::string& dir, const std::string& root) {
  const PlanLabContext context = PlanLabContext::make(lab.plan, dir, plan_lab_derivation(lab, root));
  const proof::Criterion rederived = plan_lab_criteria().front().check(context);
  return rederived.passed ? std::vector<std::string>{} : std::vector<std::string>{rederived.detail};
}

Result<bool> run_plan_lab(const Lab& lab, const std::string& root, const std::string& out) {
  SP_RETURN_IF_ERROR(validate_plan_lab(lab, root));
  std::error_code ec;
  if (std::filesystem::exists(out, ec) && !std::filesystem::is_empty(out, ec))
    return invalid_argument("--out '{}' already holds files", out)
        .with_hint("a lab writes into a new or empty directory; choose another --out");
  print(fmt::format("{} §{} {}: {} on {} × {} (nodes {}, global batch {}), {} cases with the planner\n", lab.key,
                    lab.section, lab.title, lab.plan.model, lab.plan.strategy, fmt::join(lab.plan.clusters, ", "),
                    lab.plan.nodes, lab.plan.global_batch, plan_lab_cases(lab.plan).size()));
  for (const PlanLabCase& c : plan_lab_cases(lab.plan)) {
    SP_ASSIGN_OR_RETURN(const planner::PlanQuery q, plan_lab_query(lab, c, root));
    Result<planner::PlanEvaluation> e = planner::evaluate_plan(q);
    if (!e.ok()) return e.status().with_context(fmt::format("lab {}, case {}", lab.key, c.dir()));
    // As `plan --out` writes a configuration (cmd_plan.cc write_plan_dir): plan.json, then its page.
    const std::string dir = out + "/" + c.dir();
    const evidence::RunPaths paths(dir);
    Status written = make_directories(dir);
    if (written.ok())
      written =
          write_file_atomic(paths.file(evidence::kPlanFile), planner::plan_evaluation_to_json(q, *e).dump(1) + "\n");
    SP_RETURN_IF_ERROR(written);
    SP_ASSIGN_OR_RETURN(const std::vector<std::string> problems, report::write_report(dir));
    for (const std::string& p : problems) log_line(LogLevel::kQuiet, "report: " + p);
    if (!problems.empty()) return internal_error("{}: the plan's report lists {} problem(s)", dir, problems.size());
  }
  // The verdict from what was written, as `lab verify` derives it again.
  const PlanLabContext context = PlanLabContext::make(lab.plan, out, plan_lab_derivation(lab, root));
  const proof::Gate gate = plan_lab_gate(context);
  for (const auto& [name, bytes] : derived_files(lab, context, gate))
    SP_RETURN_IF_ERROR(write_file_atomic(out + "/" + name, bytes));
  Result<std::string> summary = read_file(out + "/" + std::string(evidence::kSummaryFile));
  std::string text = summary.ok() ? *summary : "";
  text = text.substr(0, text.find("\n## Gate"));  // the title and the cases table; the gate follows as text
  print(text + "\n" + verdict_text(gate));
  // The observations follow, each with its claims checked (cmd_lab.cc).
  print("\nwhat to observe in " + out + " (shardproof lab show " + lab.key + "):\n");
  return gate.passed();
}

Result<bool> verify_plan_lab(const Lab& lab, const std::string& dir, const std::string& root) {
  if (!std::filesystem::is_directory(dir))
    return not_found("'{}' is not a directory", dir)
        .with_hint(fmt::format("shardproof lab run {} --out DIR writes one", lab.key));
  const PlanLabContext context = PlanLabContext::make(lab.plan, dir, plan_lab_derivation(lab, root));
  const proof::Gate gate = plan_lab_gate(context);
  int differing = 0;
  for (const auto& [name, bytes] : derived_files(lab, context, gate)) {
    Result<std::string> on_disk = read_file(dir + "/" + name);
    if (!on_disk.ok() || *on_disk != bytes) {
      print(fmt::format("{}/{}: differs from the gate derived from the files (edited, or from another lab)\n", dir,
                        name));
      ++differing;
    }
  }
  print(verdict_text(gate, differing));
  return gate.passed() && differing == 0;
}

}  // namespace sp::labs
