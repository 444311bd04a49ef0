// The views of a judged PyTorch recording (views.h, docs/judge.md): the judge's gate (judge/gate.json), what each
// of its views found and the first divergence (judge/first_divergence.json) — as `shardproof judge` derived them,
// since the replayed views need the engine, which the report never runs —, the tensor × step map of each view's
// ratio to its tolerance (judge/steps.jsonl), and the traced traffic (trace/). A recording judged by an earlier
// shardproof has its files beside the recorder's (no judge/ folder): read there.
#include <fmt/format.h>

#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"
#include "report/views.h"

namespace sp::report {

namespace {

constexpr std::string_view kJudgeDir = "judge";  // judge/recording.h kJudgeDir: where `judge` writes

// "judge/gate.json", or the name itself for a recording judged before the judge had its folder.
std::string judged(const std::string& dir, std::string_view name) {
  const std::string rel = fmt::format("{}/{}", kJudgeDir, name);
  return path_exists(evidence::RunPaths(dir).file(rel)) ? rel : std::string(name);
}

// The tensor × step map of judge/steps.jsonl: per view (gradients, update), each tensor's ratio to its tolerance
// at each step (null: not checked; "inf": a non-finite value or an unmeasurable difference).
json map_data(const std::vector<json>& steps) {
  json out = {
      {"steps", json::array()}, {"unchecked", json::array()}, {"loss", json::array()}, {"views", json::array()}};
  std::vector<std::string> tensors;
  for (const json& s : steps) {
    out["steps"].push_back(s.value("step", int64_t{0}));
    if (!s.value("checked", false)) out["unchecked"].push_back(s.value("step", int64_t{0}));
    out["loss"].push_back(s.value("loss", json()));
    const json ratios = s.value("ratios", json::object());
    if (tensors.empty() && ratios.contains("gradients") && ratios["gradients"].is_object())
      for (const auto& [name, v] : ratios["gradients"].items()) tensors.push_back(name);
  }
  for (const char* view : {"gradients", "update"}) {
    json rows = json::array();
    for (const std::string& t : tensors) {
      json cells = json::array();
      for (const json& s : steps) {
        const json ratios = s.value("ratios", json::object());
        cells.push_back(ratios.contains(view) && ratios[view].contains(t) ? ratios[view][t] : json());
      }
      rows.push_back({{"tensor", t}, {"ratios", cells}});
    }
    out["views"].push_back({{"name", view}, {"rows", rows}});
  }
  return out;
}

}  // namespace

bool is_judged_recording(const std::string& dir) {
  const evidence::RunPaths paths(dir);
  if (!path_exists(paths.file(judged(dir, evidence::kGateFile)))) return false;
  auto contract = read_json_file(paths.contract());
  return contract.ok() && contract->is_object() && contract->value("format", "") == "shardproof-torch";
}

std::string judged_report_file(const std::string& dir) {
  return judged(dir, evidence::kGateFile) == evidence::kGateFile
             ? std::string(evidence::kReportFile)
             : fmt::format("{}/{}", kJudgeDir, evidence::kReportFile);
}

std::vector<View> judge_views(const std::string& dir, json& d) {
  const RunDir run{.name = "recording", .path = dir, .rel = ""};
  const std::string gate_file = judged(dir, evidence::kGateFile), fd_file = judged(dir, evidence::kFirstDivergenceFile);
  std::vector<View> views;
  View gate{.id = "gate",
            .title = "Gate: every view of the recorded run against the single-device reference",
            .files = {gate_file, fd_file, std::string(evidence::kContractFile)}};
  View found{.id = "judge", .title = "What each view found", .files = {fd_file}};
  auto g = read_json_file(run.paths().file(gate_file));
  auto fd = read_json_file(run.paths().file(fd_file));
  auto contract = read_json_file(run.paths().contract());
  if (!g.ok()) gate.unreadable(run, gate_file, g.status());
  if (!fd.ok()) found.unreadable(run, fd_file, fd.status());
  if (g.ok() && fd.ok()) {
    gate.data = {{"verdict", g->value("verdict", "FAIL")},
                 {"criteria", g->value("criteria", json::array())},
                 {"first_divergence", fd->value("line", "")},
                 {"first", fd->value("first", json())},
                 {"notes", json::array()},
                 {"derived_by", fmt::format("`shardproof judge DIR` ({} and {})", gate_file, fd_file)}};
    if (!fd->value("pattern", std::string()).empty())
      gate.data["notes"].push_back("pattern: " + fd->value("pattern", ""));
    found.data = {{"line", fd->value("line", "")}, {"views", fd->value("views", json::array())}};
  }
  std::vector<View> map_view;
  if (const std::string steps_file = judged(dir, "steps.jsonl"); path_exists(run.paths().file(steps_file))) {
    View map{.id = "judge-map",
             .title = "Every tensor at every step: each view's ratio to its tolerance",
             .files = {steps_file}};
    auto doc = read_jsonl_file(run.paths().file(steps_file));
    if (!doc.ok())
      map.unreadable(run, steps_file, doc.status());
    else
      map.data = map_data(doc->records);
    map_view.push_back(std::move(map));
  }
  json s = contract.ok() ? contract->value("strategy", json::object()) : json::object();
  d["title"] = fmt::format("Judge: PyTorch run, {} (dp {} × tp {} × pp {})", s.value("name", "?"), s.value("dp", 1),
                           s.value("tp", 1), s.value("pp", 1));
  d["summary"] = {{"strategy", s.value("name", "?")},
                  {"steps", contract.ok() ? contract->value("steps", int64_t{0}) : 0},
                  {"torch", contract.ok() ? contract->value("torch", "") : ""},
                  {"verdict", g.ok() ? g->value("verdict", "FAIL") : "unknown"}};
  views.push_back(std::move(gate));
  views.push_back(std::move(found));
  for (View& m : map_view) views.push_back(std::move(m));
  // The recording has no comm_predicted.json by design: the judge compares its traffic with the engine's model
  // itself (the gate's traffic row), so the traffic view draws what was traced and says so.
  View traffic = traffic_view({run});
  const std::string no_prediction = file_problem(run, evidence::kCommPredictedFile, not_found("missing"));
  std::erase(traffic.problems, no_prediction);
  std::erase(traffic.files, std::string(evidence::kCommPredictedFile));
  traffic.notes.push_back(
      "traced traffic only: the gate's traffic row compares it with the engine's traffic model of "
      "the declared strategy (docs/judge.md §3)");
  // Where the comparison is, and its outcome, instead of a red "no prediction" next to a passing gate row
  // (issue 45): the gate's row on the traffic, as gate.json has it.
  std::string row = "the gate's traffic row";
  if (g.ok())
    for (const json& c : g->value("criteria", json::array()))
      if (c.value("name", std::string()).rfind("traffic", 0) == 0)
        row = fmt::format("the gate's row \"{}\": {}", c.value("name", std::string()),
                          c.value("passed", false) ? "pass" : "FAIL");
  if (traffic.data.contains("runs"))
    for (json& r : traffic.data["runs"]) r["prediction_elsewhere"] = row;
  views.push_back(std::move(traffic));
  return views;
}

}  // namespace sp::report
