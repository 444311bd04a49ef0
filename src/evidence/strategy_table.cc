// Strategy table rows from run directories, and their JSON rendering (strategy_table.h); the Markdown table is
// strategy_table_markdown.cc.
#include "evidence/strategy_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"
#include "evidence/comm_prediction.h"
#include "evidence/compare.h"
#include "evidence/trace_check.h"

namespace sp::evidence {
namespace {

using nlohmann::json;

const std::set<std::string>& step_phases() {
  static const std::set<std::string> k = {"forward", "backward", "grad_sync", "optimizer", "evidence", "push", "pull"};
  return k;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string axis_of(const std::string& group) { return group.substr(0, group.find('[')); }

// Config facts from contract.json (strategy label aside, the row describes what actually ran).
void fill_config(StrategyRow& row, const json& contract) {
  const json& c = contract.value("config", json::object());
  const json& p = c.value("parallel", json::object());
  const json& t = c.value("train", json::object());
  row.dp = p.value("dp", 1);
  row.tp = p.value("tp", 1);
  row.pp = p.value("pp", 1);
  row.zero = p.value("zero", 0);
  row.virtual_stages = p.value("virtual_stages", 1);
  row.schedule = p.value("schedule", std::string());
  row.reduction = p.value("reduction", std::string());
  row.recompute = t.value("recompute", std::string());
  row.world = contract.value("world_size", row.dp * row.tp * row.pp);
}

void fill_metrics(StrategyRow& row, const std::string& dir) {
  auto lines = read_jsonl_file(RunPaths(dir).metrics());
  if (!lines.ok()) {
    row.error = lines.status().message();
    return;
  }
  std::vector<double> step_s, compute_s;
  double step0 = -1, compute0 = -1;
  for (const json& m : lines->records) {
    const int64_t step = m.value("step", int64_t{-2});
    if (m.contains("eval_loss") && m["eval_loss"].is_number()) {
      row.final_eval_loss = m["eval_loss"].get<double>();
      row.has_eval_loss = true;
    }
    if (step < 0) continue;
    ++row.steps;
    row.final_loss = m.value("loss", 0.0);
    const double s = m.value("step_s", 0.0), c = m.value("compute_s", 0.0);
    if (step == 0) {
      step0 = s;
      compute0 = c;
    } else {
      step_s.push_back(s);
      compute_s.push_back(c);
    }
  }
  if (step_s.empty() && step0 >= 0) {
    step_s.push_back(step0);
    compute_s.push_back(compute0);
  }
  row.step_s = median(step_s);
  row.compute_s = median(compute_s);
}

void fill_traffic(StrategyRow& row, const std::string& dir) {
  auto rep = check_trace_dir(dir);
  if (!rep.ok()) {
    row.first_trace_problem = rep.status().message();
    return;
  }
  row.trace_found = true;
  row.trace_consistent = rep->consistent();
  row.prediction_found = rep->prediction_found;
  row.traced_equals_predicted = rep->matches_prediction();
  row.prediction_mismatches = static_cast<int64_t>(rep->prediction_mismatches.size());
  if (!rep->mismatches.empty())
    row.first_trace_problem = rep->mismatches.front().message;
  else if (!rep->prediction_mismatches.empty())
    row.first_trace_problem = rep->prediction_mismatches.front().message;
  for (const auto& [key, t] : rep->traffic)
    if (key.step >= 0) row.bytes_step = std::max(row.bytes_step, key.step);
  if (row.bytes_step < 0) return;
  for (const auto& [key, t] : rep->traffic)
    if (key.step == row.bytes_step && step_phases().count(std::string(comm::phase_name(key.phase))))
      row.group_bytes[key.group].traced += t.bytes;
  if (row.prediction_found) {
    const std::string path = RunPaths(dir).comm_predicted();
    auto doc = read_json_file(path);
    auto predicted = doc.ok() ? parse_comm_prediction(*doc, path) : Result<CommPrediction>(doc.status());
    if (predicted.ok()) {
      for (auto& [g, b] : row.group_bytes) b.predicted = 0;
      for (const auto& [rank, classes] : predicted->ranks)
        for (const auto& [key, cell] : *predicted->step(rank, row.bytes_step)) {
          if (!step_phases().count(key.second)) continue;
          StepBytes& b = row.group_bytes[key.first];
          b.predicted = std::max<int64_t>(b.predicted, 0) + cell.bytes;
          row.rank_bytes[rank] += cell.bytes;
        }
    }
  }
  for (const auto& [g, b] : row.group_bytes) {
    StepBytes& a = row.axis_bytes[axis_of(g)];
    a.traced += b.traced;
    if (b.predicted >= 0) a.predicted = std::max<int64_t>(a.predicted, 0) + b.predicted;
  }
}

void fill_memory(StrategyRow& row, const std::string& dir) {
  auto ledger = read_json_file(RunPaths(dir).ledger());
  if (!ledger.ok() || !ledger->is_object()) return;
  row.ledger_found = true;
  row.ledger_equal = ledger->value("equal", false);
  row.max_peak_bytes = ledger->value("max_peak_bytes", int64_t{0});
  if (!ledger->contains("ranks") || !(*ledger)["ranks"].is_array()) return;
  const auto cell = [](const json& j) {
    return MemoryCell{j.value("measured_peak", int64_t{0}), j.value("predicted_peak", int64_t{0})};
  };
  for (const json& r : (*ledger)["ranks"]) {
    if (!r.is_object()) continue;
    RankMemory m;
    m.rank = r.value("rank", 0);
    m.coords = r.value("coords", std::string());
    m.equal = r.value("equal", false);
    if (r.contains("total") && r["total"].is_object()) m.total = cell(r["total"]);
    if (r.contains("categories") && r["categories"].is_object())
      for (const auto& [name, c] : r["categories"].items())
        if (c.is_object()) m.categories[name] = cell(c);
    row.memory.push_back(std::move(m));
  }
}

}  // namespace

bool StrategyRow::ok() const {
  if (!error.empty() || exit_code != 0) return false;
  if (equivalence != "reference" && equivalence != "bitwise-equal" && equivalence != "within-tolerance") return false;
  if (!trace_found || !trace_consistent || (prediction_found && !traced_equals_predicted)) return false;
  return ledger_found && ledger_equal;
}

StrategyRow strategy_row_of_run(const std::string& dir, const std::string& reference_dir) {
  StrategyRow row;
  row.dir = dir;
  row.label = std::filesystem::path(dir).filename().string();
  auto contract = read_json_file(RunPaths(dir).contract());
  if (!contract.ok()) {
    row.error = contract.status().message();
    return row;
  }
  fill_config(row, *contract);
  fill_metrics(row, dir);
  if (!row.error.empty()) return row;
  auto bubble = bubble_of_run(dir);
  if (bubble.ok()) {
    row.has_bubble = true;
    row.bubble = std::move(*bubble);
  }
  fill_traffic(row, dir);
  fill_memory(row, dir);
  if (reference_dir.empty()) row.equivalence = "reference";
  return row;
}

void fill_ratios(std::vector<StrategyRow>& rows) {
  if (rows.empty() || rows[0].equivalence != "reference" || rows[0].step_s <= 0) return;
  for (StrategyRow& r : rows)
    if (r.error.empty() && r.step_s > 0) r.ratio_vs_ref = r.step_s / rows[0].step_s;
}

json StrategyRow::to_json() const {
  json j = {{"label", label},
            {"dir", dir},
            {"overrides", overrides},
            {"world", world},
            {"dp", dp},
            {"tp", tp},
            {"pp", pp},
            {"zero", zero},
            {"schedule", schedule},
            {"virtual_stages", virtual_stages},
            {"reduction", reduction},
            {"recompute", recompute},
            {"ok", ok()},
            {"exit_code", exit_code}};
  if (!error.empty()) {
    j["error"] = error;
    return j;
  }
  j["time"] = {{"steps", steps},
               {"step_s_median", step_s},
               {"ratio_vs_dp1", ratio_vs_ref},
               {"compute_s_median_rank0", compute_s}};
  j["bubble"] = has_bubble ? bubble.to_json() : json(nullptr);
  if (has_bubble) j["bubble"].erase("rank_steps");  // per-rank detail: `shardproof bubble DIR --json`
  json groups = json::object(), axes = json::object();
  for (const auto& [g, b] : group_bytes)
    groups[g] = {{"traced", b.traced}, {"predicted", b.predicted < 0 ? json(nullptr) : json(b.predicted)}};
  for (const auto& [a, b] : axis_bytes)
    axes[a] = {{"traced", b.traced}, {"predicted", b.predicted < 0 ? json(nullptr) : json(b.predicted)}};
  j["traffic"] = {{"trace_found", trace_found},
                  {"consistent", trace_consistent},
                  {"prediction_found", prediction_found},
                  {"traced_equals_predicted", traced_equals_predicted},
                  {"prediction_mismatches", prediction_mismatches},
                  {"first_problem", first_trace_problem},
                  {"step", bytes_step},
                  {"bytes_per_step_by_group", groups},
                  {"bytes_per_step_by_axis", axes}};
  json ranks = json::array();
  for (const RankMemory& m : memory) {
    json cats = json::object();
    for (const auto& [name, c] : m.categories)
      cats[name] = {{"measured_peak", c.measured_peak}, {"predicted_peak", c.predicted_peak}};
    ranks.push_back(
        {{"rank", m.rank},
         {"coords", m.coords},
         {"equal", m.equal},
         {"categories", cats},
         {"total", {{"measured_peak", m.total.measured_peak}, {"predicted_peak", m.total.predicted_peak}}}});
  }
  j["memory"] = {
      {"ledger_found", ledger_found}, {"equal", ledger_equal}, {"max_peak_bytes", max_peak_bytes}, {"ranks", ranks}};
  j["equivalence"] = {{"class", equivalence},
                      {"max_rel_loss", max_rel_loss},
                      {"max_rel_param", max_rel_param},
                      {"max_rel_grad_first_step", max_rel_grad_first},
                      {"max_rel_grad_later", max_rel_grad_later},
                      {"first_divergence", first_divergence}};
  j["loss"] = {{"final", final_loss}, {"final_eval", has_eval_loss ? json(final_eval_loss) : json(nullptr)}};
  return j;
}

json strategy_table_json(const std::vector<StrategyRow>& rows) {
  json j = {{"format_version", kStrategyTableFormatVersion}, {"rows", json::array()}};
  bool all_ok = true;
  for (const StrategyRow& r : rows) {
    j["rows"].push_back(r.to_json());
    all_ok = all_ok && r.ok();
  }
  j["ok"] = all_ok;
  return j;
}

}  // namespace sp::evidence
