// The report's data per bundle kind (report_data.h): which views a proof, a run and a compare
// directory get, which of their files must exist, and the final pass that makes the document a pure
// function of the bundle's bytes (paths relative to the bundle, non-finite numbers as null).
#include "report/report_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#include "comm/trace_context.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"
#include "evidence/trace_check.h"
#include "proof/bundle.h"
#include "proof/gate.h"
#include "proof/seal.h"
#include "report/views.h"

namespace sp::report {
namespace fs = std::filesystem;
namespace {

// Strings lose the bundle's location: the readers' messages name files by the path given to them (the
// bundle's absolute path here), and the files prove and compare wrote name them by the path *they* were
// given (`recorded`, read back from prove.json's commands and compare.json's rows). Both become
// relative to the bundle, so the data do not depend on where the bundle lies now or lay then. Numbers
// that JSON cannot hold become null. Applied to the whole document, so no view can leak either.
void scrub(json& j, const std::string& dir, const std::vector<std::string>& recorded) {
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    const auto replace_all = [&s](const std::string& from, const std::string& to) {
      for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
        s.replace(p, from.size(), to);
    };
    replace_all(dir + "/", "");
    replace_all(dir, ".");
    for (const std::string& r : recorded) replace_all(r + "/", "");
    j = s;
  } else if (j.is_number_float()) {
    if (!std::isfinite(j.get<double>())) j = nullptr;
  } else if (j.is_structured()) {
    for (json& x : j) scrub(x, dir, recorded);
  }
}

// Where prove / compare were told to write the bundle, as their files record it (longest first).
std::vector<std::string> recorded_locations(BundleKind kind, const std::string& dir) {
  std::set<std::string> out;
  const auto add = [&out](std::string p) {
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    if (!p.empty() && p != "." && p != "/") out.insert(p);
  };
  if (kind == BundleKind::kProof)
    if (auto prove = read_json_file(evidence::ProofPaths(dir).prove()); prove.ok() && prove->contains("stages"))
      for (const json& st : (*prove)["stages"]) {
        // "train --root R ... --out OUT/<stage> ...": the stage's own directory is OUT/<name> (OUT for contract).
        const std::string cmd = st.value("command", std::string()), name = st.value("name", std::string());
        const size_t at = cmd.find("--out ");
        if (at == std::string::npos) continue;
        std::string o = cmd.substr(at + 6, cmd.find(' ', at + 6) - (at + 6));
        if (name != "contract" && o.size() > name.size() + 1 &&
            o.compare(o.size() - name.size() - 1, std::string::npos, "/" + name) == 0)
          o.resize(o.size() - name.size() - 1);
        add(o);
      }
  if (kind == BundleKind::kCompare)
    if (auto table = read_json_file(evidence::RunPaths(dir).file(evidence::kCompareFile));
        table.ok() && table->contains("rows"))
      for (const json& row : (*table)["rows"]) {
        const std::string d = row.value("dir", std::string()), label = row.value("label", std::string());
        if (!label.empty() && d.size() > label.size() + 1 &&
            d.compare(d.size() - label.size() - 1, std::string::npos, "/" + label) == 0)
          add(d.substr(0, d.size() - label.size() - 1));
      }
  std::vector<std::string> v(out.begin(), out.end());
  std::sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return v;
}

// A builder that meets a file of valid JSON but an unexpected shape (a number where an object belongs)
// reports it in its view instead of ending the process: the page still says what is wrong.
View guarded(const std::string& id, const std::function<View()>& build) {
  try {
    return build();
  } catch (const json::exception& e) {
    View v{.id = id, .title = id};
    v.problems.push_back(fmt::format("{} view: a file it reads has an unexpected structure ({})", id, e.what()));
    return v;
  }
}

// The frozen configuration's headline: name, grid, schedule, steps (from contract.json's config).
json config_summary(const json& contract) {
  const json cfg = contract.value("config", json::object());
  const json par = cfg.value("parallel", json::object());
  const json train = cfg.value("train", json::object());
  // A schedule orders pipeline stages: without a pipeline (pp 1) there is none to name (issue 45: LSL-D's page
  // said "1f1b" for a run on dp alone), and the page leaves out a null fact.
  const bool pipeline = par.value("pp", 1) > 1;
  return {{"name", cfg.value("name", "")},
          {"dp", par.value("dp", 1)},
          {"tp", par.value("tp", 1)},
          {"pp", par.value("pp", 1)},
          {"zero", par.value("zero", 0)},
          {"schedule", pipeline ? json(par.value("schedule", "")) : json(nullptr)},
          {"virtual_stages", pipeline ? json(par.value("virtual_stages", 1)) : json(nullptr)},
          {"reduction", par.value("reduction", "")},
          {"steps", train.value("steps", int64_t{0})},
          {"contract_hash", contract.value("hash", "")}};
}

std::string grid_text(const json& c) {
  const std::string grid = fmt::format("dp {} × tp {} × pp {}, ZeRO-{}", c.value("dp", 1), c.value("tp", 1),
                                       c.value("pp", 1), c.value("zero", 0));
  return c["schedule"].is_string() ? grid + ", " + c["schedule"].get<std::string>() : grid;
}

// The first step the run's own traced training traffic covers (a resumed run starts at its checkpoint).
json first_traced_step(const evidence::RunPaths& run) {
  auto report = evidence::check_trace_dir(run.root());
  if (!report.ok()) return nullptr;
  int64_t first = INT64_MAX;
  for (const auto& [k, t] : report->traffic)
    if (k.phase != comm::Phase::kSetup && k.phase != comm::Phase::kCheckpoint) first = std::min(first, k.step);
  return first == INT64_MAX ? json(nullptr) : json(first);
}

// A proof bundle's stages as the report reads them: every stage prove.json lists (the anchored replays
// of a non-bitwise configuration included), a note for each that did not run or did not finish.
std::vector<RunDir> proof_stages(const proof::ProofBundle& bundle, json& d) {
  std::vector<std::string_view> names(evidence::kStageNames.begin(), evidence::kStageNames.end());
  if (!bundle.anchors().empty()) names.push_back(evidence::kAnchoredStage);
  if (!bundle.fault_anchors().empty()) names.push_back(evidence::kFaultAnchoredStage);
  std::vector<RunDir> ran;
  for (std::string_view stage : names) {
    const json* st = bundle.stage(stage);
    if (st == nullptr) {
      d["notes"].push_back(fmt::format("{}: the stage did not run", stage));
      continue;
    }
    const bool ok = st->value("exit_code", -1) == 0;
    // The fault stage may end early: the fault it injects can stop the job, and the gate judges its detection,
    // not its end (docs/prove.md). That is information, not a warning under a PASS (issue 45: a green PASS sat
    // under a yellow "stage ended with exit 1"); any other stage's end is a warning (and fails the gate).
    if (!ok && stage == evidence::kFaultStage)
      d["info"].push_back(
          fmt::format("fault: the stage ended with exit {} ({}), as an injected fault may end it; "
                      "the gate judges its detection, not its end",
                      st->value("exit_code", -1), st->value("error", std::string("?"))));
    else if (!ok)
      d["notes"].push_back(fmt::format("{}: the stage ended with exit {}: {}", stage, st->value("exit_code", -1),
                                       st->value("error", std::string("?"))));
    ran.push_back({.name = std::string(stage),
                   .path = bundle.paths().stage(stage).root(),
                   .rel = std::string(stage) + "/",
                   .expected = ok});
  }
  return ran;
}

void proof_views(const std::string& dir, json& d, std::vector<View>& views) {
  const evidence::ProofPaths paths(dir);
  const RunDir top{.name = "proof", .path = dir, .rel = ""};
  const auto verdict = proof::derive_gate(dir);
  auto opened = proof::ProofBundle::open(dir);
  if (!opened.ok()) {  // prove.json or the frozen contract unreadable: the gate view says the same
    views.push_back(guarded("gate", [&] { return gate_view(verdict, {}); }));
    for (std::string_view f : {evidence::kProveFile, evidence::kContractFile})
      if (!path_exists(paths.file(f))) d["problems"].push_back(file_problem(top, f, opened.status()));
    if (d["problems"].empty()) d["problems"].push_back(opened.status().message());
    d["title"] = "Proof (unreadable)";
    return;
  }
  const proof::ProofBundle& bundle = *opened;
  const json cfg = config_summary(bundle.contract());
  // Missing files: what the seal lists and the directory no longer holds.
  if (auto seal = proof::check_seal(dir); !seal.ok()) {
    d["problems"].push_back(file_problem(top, evidence::kSealFile, seal.status()));
  } else {
    for (const std::string& s : *seal)
      if (s.ends_with(": missing")) d["problems"].push_back(s);  // the view that needs it says the same
  }
  const int64_t k = bundle.checkpoint_step();
  const std::vector<RunDir> ran = proof_stages(bundle, d);
  views.push_back(guarded("gate", [&] { return gate_view(verdict, ran); }));
  const auto find = [&](std::string_view name) -> const RunDir* {
    for (const RunDir& r : ran)
      if (r.name == name) return &r;
    return nullptr;
  };
  d["title"] =
      fmt::format("Proof: {}, {}; fault {}", cfg.value("name", "?"), grid_text(cfg), bundle.fault().to_string());
  d["summary"] = cfg;
  if (bundle.prove().contains("lab")) d["lab"] = bundle.prove().at("lab");  // a lab's bundle opens with its lab
  d["summary"]["verdict"] = verdict.ok() ? (verdict->gate.passed() ? "PASS" : "FAIL") : "unknown";
  d["summary"]["fault"] = bundle.fault().to_string();
  d["summary"]["checkpoint_step"] = k;
  views.push_back(guarded("divergence", [&] { return divergence_view(bundle, verdict); }));
  const RunDir* par = find(evidence::kParallelStage);
  if (par != nullptr) {
    views.push_back(guarded("pipeline", [&] { return pipeline_view(*par); }));
    views.push_back(guarded("time", [&] { return time_view(*par); }));
    views.push_back(guarded("memory", [&] { return memory_view(*par); }));
  }
  std::vector<RunDir> traced, curves, saved;
  for (std::string_view n : {evidence::kParallelStage, evidence::kFaultStage})
    if (const RunDir* r = find(n)) traced.push_back(*r);
  views.push_back(guarded("traffic", [&] { return traffic_view(traced); }));
  json marks = {{"checkpoint_step", k}, {"fault_step", bundle.fault().step}};
  for (std::string_view n : evidence::kStageNames)  // the anchored replays hold single steps, not a trajectory
    if (const RunDir* r = find(n)) curves.push_back(*r);
  views.push_back(guarded("curves", [&] { return curves_view(curves, marks); }));
  for (std::string_view n : {evidence::kParallelStage, evidence::kFaultStage, evidence::kRecoveryStage})
    if (const RunDir* r = find(n)) saved.push_back(*r);
  json resume = json::object();
  if (const RunDir* rec = find(evidence::kRecoveryStage))
    resume = {{"run", evidence::kRecoveryStage},
              {"from", evidence::kParallelStage},
              {"checkpoint_step", k},
              {"first_traced_step", first_traced_step(rec->paths())}};
  views.push_back(guarded("checkpoints", [&] { return checkpoints_view(saved, resume); }));
}

void run_views(const std::string& dir, json& d, std::vector<View>& views) {
  const RunDir run{.name = "run", .path = dir, .rel = ""};
  auto contract = read_json_file(run.paths().contract());
  if (!contract.ok()) d["problems"].push_back(file_problem(run, evidence::kContractFile, contract.status()));
  const json cfg = config_summary(contract.ok() ? *contract : json::object());
  const bool traced =
      contract.ok() &&
      (*contract).value("config", json::object()).value("evidence", json::object()).value("trace", true);
  std::vector<std::string_view> required = {evidence::kTopologyFile, evidence::kMetricsFile, evidence::kChecksumsFile,
                                            evidence::kLedgerFile, evidence::kTimelineDir};
  if (traced) required.insert(required.end(), {evidence::kTraceDir, evidence::kCommPredictedFile});
  for (std::string_view f : required)
    if (!path_exists(run.paths().file(f))) d["problems"].push_back(fmt::format("{}: missing", f));
  d["title"] = fmt::format("Run: {}, {}", cfg.value("name", "?"), grid_text(cfg));
  d["summary"] = cfg;
  views.push_back(guarded("pipeline", [&] { return pipeline_view(run); }));
  views.push_back(guarded("time", [&] { return time_view(run); }));
  views.push_back(guarded("memory", [&] { return memory_view(run); }));
  if (traced) views.push_back(guarded("traffic", [&] { return traffic_view({run}); }));
  views.push_back(guarded("curves", [&] { return curves_view({run}, json::object()); }));
  views.push_back(guarded("checkpoints", [&] {
    return checkpoints_view({run}, json::object());
  }));  // a restart resumes at LATEST (in the view)
}

void compare_views(const std::string& dir, json& d, std::vector<View>& views) {
  View table = guarded("compare", [&] { return compare_view(dir); });
  std::vector<RunDir> runs;
  if (!table.data.is_null())
    for (const json& row : table.data["rows"]) {
      const std::string label = row.value("label", "");
      if (row.contains("error")) {
        d["notes"].push_back(fmt::format("{}: {}", label, row.value("error", "")));
        continue;
      }
      runs.push_back({.name = label, .path = evidence::RunPaths(dir).file(label), .rel = label + "/"});
    }
  d["title"] = table.data.is_null()
                   ? "Compare"
                   : fmt::format("Compare: preset {}, strategies {}",
                                 table.data.value("preset", "") == "" ? "tiny" : table.data.value("preset", ""),
                                 table.data.value("strategies", ""));
  d["summary"] = {{"ok", table.data.is_null() ? json(nullptr) : table.data["ok"]}, {"strategies", runs.size()}};
  views.push_back(std::move(table));
  views.push_back(guarded("curves", [&] { return curves_view(runs, json::object()); }));
}

}  // namespace

const char* bundle_kind_name(BundleKind kind) {
  switch (kind) {
    case BundleKind::kRun:
      return "run";
    case BundleKind::kProof:
      return "proof";
    case BundleKind::kCompare:
      return "compare";
    case BundleKind::kPlan:
      return "plan";
    case BundleKind::kJudge:
      return "judge";
  }
  return "?";
}

Result<BundleKind> bundle_kind_of(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return invalid_argument("'{}' is not a directory", dir)
        .with_hint("pass a bundle directory: `prove --out`, `train --out` or `compare --out`");
  const evidence::RunPaths paths(dir);
  if (path_exists(paths.file(evidence::kProveFile))) return BundleKind::kProof;
  if (path_exists(paths.file(evidence::kCompareFile))) return BundleKind::kCompare;
  if (path_exists(paths.file(evidence::kPlanFile))) return BundleKind::kPlan;
  if (is_judged_recording(dir)) return BundleKind::kJudge;
  if (path_exists(paths.contract()))
    for (std::string_view f : {evidence::kMetricsFile, evidence::kChecksumsFile, evidence::kTopologyFile,
                               evidence::kLedgerFile, evidence::kTraceDir, evidence::kTimelineDir})
      if (path_exists(paths.file(f))) return BundleKind::kRun;
  return invalid_argument(
             "'{}' is not a shardproof bundle: it holds none of {} (a proof), {} (a compare directory), {} (a plan), "
             "{} "
             "with a run's evidence (a run)",
             dir, evidence::kProveFile, evidence::kCompareFile, evidence::kPlanFile, evidence::kContractFile)
      .with_hint("pass the directory given to `prove --out`, `compare --out`, `plan --out` or `train --out`");
}

Result<json> report_data(const std::string& given) {
  SP_ASSIGN_OR_RETURN(const BundleKind kind, bundle_kind_of(given));
  std::error_code ec;
  const std::string dir = fs::weakly_canonical(fs::absolute(given), ec).string();
  json d = {{"format", "shardproof-report"},
            {"format_version", kReportDataVersion},
            {"kind", bundle_kind_name(kind)},
            {"problems", json::array()},
            {"notes", json::array()}};
  std::vector<View> views;
  try {
    switch (kind) {
      case BundleKind::kProof:
        proof_views(dir, d, views);
        break;
      case BundleKind::kRun:
        run_views(dir, d, views);
        break;
      case BundleKind::kCompare:
        compare_views(dir, d, views);
        break;
      case BundleKind::kPlan:
        views = plan_views(dir, d);
        break;
      case BundleKind::kJudge:
        views = judge_views(dir, d);
        break;
    }
  } catch (const json::exception& e) {  // prove.json, contract.json or compare.json of an unexpected shape
    d["problems"].push_back(
        fmt::format("the bundle's {} files have an unexpected structure ({})", bundle_kind_name(kind), e.what()));
  }
  // Top-level problems: the bundle's, then every view's, each once.
  std::set<std::string> seen;
  json problems = json::array();
  const auto add = [&](const std::string& p) {
    if (seen.insert(p).second) problems.push_back(p);
  };
  for (const json& p : d["problems"]) add(p.get<std::string>());
  d["views"] = json::array();
  for (const View& v : views) {
    for (const std::string& p : v.problems) add(p);
    d["views"].push_back(v.to_json());
  }
  d["problems"] = problems;
  scrub(d, dir, recorded_locations(kind, dir));
  return d;
}

std::vector<std::string> report_problems(const json& data) {
  std::vector<std::string> out;
  if (data.contains("problems") && data["problems"].is_array())
    for (const json& p : data["problems"])
      if (p.is_string()) out.push_back(p.get<std::string>());
  return out;
}

}  // namespace sp::report
