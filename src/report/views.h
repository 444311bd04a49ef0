// The report's views, one builder per view (docs/report.md §Views): each reads its evidence through the
// existing readers (evidence/, ckpt/, proof/) and returns what the page draws, with the files it came
// from (named by evidence/bundle_paths.h) and, for each file it could not read, a problem naming it.
// Not the assembly per bundle kind (report_data.cc) and not the page (render.h).
// Invariant: a builder never fails; a file it cannot read becomes a problem (or, for a stage that did
// not finish, a note) and the view's data say what is absent. Schema: docs/formats/report_data.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "evidence/bundle_paths.h"
#include "proof/bundle.h"
#include "proof/gate.h"

namespace sp::report {

using json = nlohmann::json;

// One run directory of the bundle.
struct RunDir {
  std::string name = {};  // "run", "reference", "parallel", "fault", "recovery", or a compare label
  std::string path = {};  // absolute path of the directory
  std::string rel = {};   // prefix of the files it names in the report: "" (a run bundle) or "parallel/"
  bool expected = true;   // false: the stage did not finish, so a missing file is a note, not a problem
  evidence::RunPaths paths() const { return evidence::RunPaths(path); }
  std::string label(std::string_view file) const { return rel + std::string(file); }  // "parallel/ledger.json"
  std::string dir_label(std::string_view dir) const { return label(dir) + "/"; }      // "parallel/trace/"
};

struct View {
  std::string id = {}, title = {};
  std::vector<std::string> files = {};     // relative to the bundle
  std::vector<std::string> problems = {};  // each names a file: "parallel/ledger.json: missing"
  std::vector<std::string> notes = {};     // what is absent by design ("fault: the stage ended with exit 1")
  json data = {};                          // what the page draws; null when nothing could be read
  json to_json() const;
  // Records that `file` of `run` could not be read: a problem, or a note when the run did not finish.
  void unreadable(const RunDir& run, std::string_view file, const Status& why);
};

// Intervals kept in the Gantt chart at most; a longer timeline keeps its first steps (docs/report.md).
inline constexpr int64_t kMaxGanttIntervals = 10000;
// Steps per rank whose split the time view keeps (its mean covers every step).
inline constexpr size_t kMaxSplitSteps = 64;
// Values kept in the divergence view per run at most; beyond it tensors are merged per unit (layer).
inline constexpr int64_t kMaxDivergenceValues = 40000;
// Bars of the traffic chart at most: beyond it consecutive steps are summed into one bar.
inline constexpr size_t kMaxTrafficSteps = 64;
// The rank × rank matrix is left out above this many ranks (it grows as the square).
inline constexpr int kMaxMatrixRanks = 128;
// Points per curve at most: beyond it every k-th step is kept (and the last one).
inline constexpr size_t kMaxCurvePoints = 2000;

View pipeline_view(const RunDir& run);
// Where each rank's step time went, by kind (time_view.cc; core/time_split.h), from timeline/'s split lines.
View time_view(const RunDir& run);
View memory_view(const RunDir& run);
View traffic_view(const std::vector<RunDir>& runs);
// `marks`: steps the chart marks, e.g. {"fault": 4, "checkpoint": 4} (an empty object for none).
View curves_view(const std::vector<RunDir>& runs, const json& marks);
// `resume`: for a proof, the recovery run that resumed and from which step ({} for none).
View checkpoints_view(const std::vector<RunDir>& runs, const json& resume);

// `stages`: the stage directories the verdict read (named under the view).
View gate_view(const Result<proof::ProofVerdict>& verdict, const std::vector<RunDir>& stages);
// The fault run as the first divergence reads it (proof::fault_reading: the fault run, or its anchored
// replay, against the reference) and the parallel run (or its anchored replay) against the reference,
// per tensor and step, in the class the contract promises; the free-running drift (verdict.drift).
View divergence_view(const proof::ProofBundle& bundle, const Result<proof::ProofVerdict>& verdict);
View compare_view(const std::string& dir);
// A plan directory's views (plan_views.cc): plan-time, plan-memory, plan-traffic and plan-pipeline for one
// configuration, plan-search for a --search result; `d` gets the title and summary.
std::vector<View> plan_views(const std::string& dir, json& d);
// A judged PyTorch recording's views (judge_views.cc): the judge's gate and its views' findings, as `judge`
// wrote them (gate.json, first_divergence.json), and the traced traffic; `d` gets the title and summary.
std::vector<View> judge_views(const std::string& dir, json& d);
// DIR/contract.json is a PyTorch recording's (format "shardproof-torch") and DIR/gate.json exists.
bool is_judged_recording(const std::string& dir);
// Where a judged recording's report.html goes: judge/report.html (a recording judged before the judge had its
// folder: report.html beside the recorder's files).
std::string judged_report_file(const std::string& dir);

// "parallel/ledger.json: missing" for a file that does not exist, else "<rel><file>: <message>".
std::string file_problem(const RunDir& run, std::string_view file, const Status& why);

}  // namespace sp::report
