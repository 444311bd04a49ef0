// The plan views (views.h): a `shardproof plan --out` directory drawn from its plan.json, the planner's
// own document (docs/plan.md §8): nothing is recomputed, so the page shows what the planner printed.
// One configuration: plan-time (step time split, tokens/s, MFU, HFU, every assumption), plan-memory
// (per rank and category against the device limit), plan-traffic (bytes and seconds per axis, phase and
// op, on the link each group crosses), plan-pipeline (the simulated schedule as a Gantt chart; pp > 1).
// A --search result: plan-search (the ranked strategies; the excluded ones per kind and rule).
// Invariant: every value a view holds is plan.json's, under the same key (docs/formats/report_data.md).
#include <fmt/format.h>

#include "core/json_io.h"
#include "planner/search.h"
#include "report/views.h"

namespace sp::report {
namespace {

// Ranked strategies the search view keeps (the best first); the count of the rest is in the data.
constexpr size_t kMaxRankedShown = 100;

json inputs_summary(const json& in) {
  const json& cl = in.at("cluster");
  const json& m = in.at("model");
  json s = {{"cluster", cl.value("name", "")},
            {"nodes", cl.at("nodes")},
            {"devices_per_node", cl.at("devices_per_node")},
            {"model", m.value("name", "")},
            {"params", m.value("params", json(nullptr))},
            {"global_batch", in.at("global_batch")},
            {"seq_len", in.at("seq_len")},
            {"dtype", in.value("dtype", "")},
            {"efficiency", in.value("efficiency", json(nullptr))}};
  if (in.contains("strategy")) s["strategy"] = in["strategy"];
  if (in.contains("activation_model")) s["activation_model"] = in["activation_model"];
  return s;
}

std::vector<View> one_configuration(const json& p, const std::vector<std::string>& files, json& d) {
  const json in = inputs_summary(p.at("inputs"));
  const json& strategy = in.at("strategy");
  d["title"] = fmt::format("Plan: {} on {} ({} nodes × {}), {}", in["model"].get<std::string>(),
                           in["cluster"].get<std::string>(), in["nodes"].dump(), in["devices_per_node"].dump(),
                           strategy.value("name", ""));
  d["summary"] = {{"kind", "configuration"},
                  {"fits", p.at("memory").at("fits")},
                  {"step_seconds", p.at("step").at("seconds")},
                  {"tokens_per_second", p.at("step").at("tokens_per_second")},
                  {"mfu", p.at("step").at("mfu")}};
  std::vector<View> views;
  const json& pl = p.at("pipeline");
  views.push_back({.id = "plan-time",
                   .title = "Step time on the described cluster",
                   .files = files,
                   .data = {{"inputs", in},
                            {"step", p.at("step")},
                            {"pipeline",
                             {{"simulated_seconds", pl.at("simulated_seconds")},
                              {"bubble_fraction", pl.at("bubble_fraction")},
                              {"closed_form_bubble_fraction", pl.at("closed_form_bubble_fraction")}}},
                            {"compute",
                             {{"model_flops", p.at("compute").at("model_flops")},
                              {"hardware_flops", p.at("compute").at("hardware_flops")}}},
                            {"assumptions", p.at("assumptions")}}});
  json memory = p.at("memory");
  for (json& r : memory.at("ranks")) r.erase("traffic");  // plan-traffic draws the busiest rank's cells
  views.push_back({.id = "plan-memory", .title = "Memory per rank against the device", .files = files, .data = memory});
  views.push_back({.id = "plan-traffic",
                   .title = "Bytes and time per group, phase and operation",
                   .files = files,
                   .data = {{"grid", p.at("placement").at("grid")},
                            {"warnings", p.at("placement").value("warnings", json::array())},
                            {"links", p.at("placement").at("links")},
                            {"traffic", p.at("traffic")}}});
  if (strategy.value("pp", 1) > 1) {
    json pipe = pl;
    pipe["pp"] = strategy.at("pp");
    pipe["chunk_seconds"] = p.at("compute").at("chunk_seconds");
    views.push_back({.id = "plan-pipeline", .title = "The simulated pipeline", .files = files, .data = pipe});
  }
  return views;
}

std::vector<View> search(const json& p, const std::vector<std::string>& files, json& d) {
  const json in = inputs_summary(p.at("inputs"));
  const json& ranked = p.at("ranked");
  d["title"] = fmt::format("Plan search: {} on {} ({} nodes × {}), global batch {}", in["model"].get<std::string>(),
                           in["cluster"].get<std::string>(), in["nodes"].dump(), in["devices_per_node"].dump(),
                           in["global_batch"].dump());
  d["summary"] = {{"kind", "search"},
                  {"enumerated", p.at("enumerated")},
                  {"ranked", ranked.size()},
                  {"excluded", p.at("excluded").size()},
                  {"best", ranked.empty() ? json(nullptr) : ranked[0].at("strategy").at("name")}};
  json shown = json::array();
  for (size_t i = 0; i < std::min(ranked.size(), kMaxRankedShown); ++i) shown.push_back(ranked[i]);
  return {View{.id = "plan-search",
               .title = "Every strategy, ranked by step time",
               .files = files,
               .data = {{"inputs", in},
                        {"enumerated", p.at("enumerated")},
                        {"ranked", shown},
                        {"ranked_total", ranked.size()},
                        {"excluded_total", p.at("excluded").size()},
                        {"excluded_by_kind", p.at("excluded_by_kind")},
                        {"excluded_by_rule", planner::excluded_by_rule(p.at("excluded"))},
                        {"assumptions", p.at("assumptions")}}}};
}

}  // namespace

std::vector<View> plan_views(const std::string& dir, json& d) {
  const RunDir top{.name = "plan", .path = dir, .rel = ""};
  const std::vector<std::string> files = {top.label(evidence::kPlanFile)};
  d["title"] = "Plan";
  auto p = read_json_file(top.paths().file(evidence::kPlanFile));
  if (!p.ok()) {
    View v{.id = "plan-time", .title = "Step time on the described cluster", .files = files};
    v.unreadable(top, evidence::kPlanFile, p.status());
    return {v};
  }
  if (p->value("format_version", 0) != 1 || !p->contains("inputs")) {
    View v{.id = "plan-time", .title = "Step time on the described cluster", .files = files};
    v.problems.push_back(top.label(evidence::kPlanFile) +
                         ": not a `shardproof plan --json` document of format_version 1 (docs/plan.md §8)");
    return {v};
  }
  return p->contains("ranked") ? search(*p, files, d) : one_configuration(*p, files, d);
}

}  // namespace sp::report
