// The views of a judged PyTorch recording (views.h, docs/judge.md): the judge's gate (gate.json), what each of
// its views found and the first divergence (first_divergence.json) — as `shardproof judge` derived them, since
// the anchored views need the engine, which the report never runs — and the traced traffic (trace/).
#include <fmt/format.h>

#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"
#include "report/views.h"

namespace sp::report {

bool is_judged_recording(const std::string& dir) {
  const evidence::RunPaths paths(dir);
  if (!path_exists(paths.file(evidence::kGateFile))) return false;
  auto contract = read_json_file(paths.contract());
  return contract.ok() && contract->is_object() && contract->value("format", "") == "shardproof-torch";
}

std::vector<View> judge_views(const std::string& dir, json& d) {
  const RunDir run{.name = "recording", .path = dir, .rel = ""};
  std::vector<View> views;
  View gate{.id = "gate",
            .title = "Gate: every view of the recorded run against the single-device reference",
            .files = {std::string(evidence::kGateFile), std::string(evidence::kFirstDivergenceFile),
                      std::string(evidence::kContractFile)}};
  View found{.id = "judge", .title = "What each view found", .files = {std::string(evidence::kFirstDivergenceFile)}};
  auto g = read_json_file(run.paths().file(evidence::kGateFile));
  auto fd = read_json_file(run.paths().file(evidence::kFirstDivergenceFile));
  auto contract = read_json_file(run.paths().contract());
  if (!g.ok()) gate.unreadable(run, evidence::kGateFile, g.status());
  if (!fd.ok()) found.unreadable(run, evidence::kFirstDivergenceFile, fd.status());
  if (g.ok() && fd.ok()) {
    gate.data = {{"verdict", g->value("verdict", "FAIL")},
                 {"criteria", g->value("criteria", json::array())},
                 {"first_divergence", fd->value("line", "")},
                 {"first", fd->value("first", json())},
                 {"notes", json::array()},
                 {"derived_by", fmt::format("`shardproof judge DIR` ({} and {})", evidence::kGateFile,
                                            evidence::kFirstDivergenceFile)}};
    found.data = {{"line", fd->value("line", "")}, {"views", fd->value("views", json::array())}};
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
