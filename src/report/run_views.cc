// The views of one run's evidence (views.h): the pipeline Gantt from timeline/, memory from ledger.json,
// traffic from trace/ against comm_predicted.json. Each value is a reader's (evidence/bubble.h,
// evidence/trace_check.h) or the file's own; the only arithmetic here is layout: idle gaps between a
// rank's intervals and the even split of a rank's collective bytes over its group's other members.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "comm/trace_context.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bubble.h"
#include "evidence/trace_check.h"
#include "report/views.h"

namespace sp::report {
namespace {

constexpr int kListedProblems = 5;  // mismatches listed per run; the count says how many there are

// The gaps of [0, span) that no interval covers, in time order: the rank waited without a recorded
// reason (before its first micro-batch, between schedule slots, after its last one).
std::vector<std::pair<int64_t, int64_t>> idle_gaps(std::vector<std::pair<int64_t, int64_t>> busy, int64_t span) {
  std::sort(busy.begin(), busy.end());
  std::vector<std::pair<int64_t, int64_t>> gaps;
  int64_t cursor = 0;
  for (const auto& [t0, t1] : busy) {
    if (t0 > cursor) gaps.push_back({cursor, t0});
    cursor = std::max(cursor, t1);
  }
  if (span > cursor) gaps.push_back({cursor, span});
  return gaps;
}

json first_messages(const std::vector<evidence::TraceMismatch>& list) {
  json out = json::array();
  for (size_t i = 0; i < list.size() && i < kListedProblems; ++i) out.push_back(list[i].message);
  return out;
}

}  // namespace

json View::to_json() const {
  return {{"id", id}, {"title", title}, {"files", files}, {"problems", problems}, {"notes", notes}, {"data", data}};
}

std::string file_problem(const RunDir& run, std::string_view file, const Status& why) {
  if (!path_exists(run.paths().file(file))) return fmt::format("{}: missing", run.label(file));
  return fmt::format("{}: {}", run.label(file), why.message());
}

void View::unreadable(const RunDir& run, std::string_view file, const Status& why) {
  const std::string text = file_problem(run, file, why);
  if (run.expected)
    problems.push_back(text);
  else
    notes.push_back(text + " (the stage did not finish)");
}

View pipeline_view(const RunDir& run) {
  View v{.id = "pipeline",
         .title = "Pipeline schedule (Gantt) and bubble",
         .files = {run.dir_label(evidence::kTimelineDir), run.label(evidence::kTopologyFile),
                   run.label(evidence::kContractFile)}};
  auto timelines = evidence::read_run_timelines(run.path);
  if (!timelines.ok()) {
    v.unreadable(run, evidence::kTimelineDir, timelines.status());
    return v;
  }
  const evidence::BubbleReport bubble =
      evidence::bubble_of_timelines(timelines->timelines, timelines->places, timelines->shape);
  json d = bubble.to_json();
  d.erase("rank_steps");
  d["run"] = run.name;

  // The steps shown: those the bubble is measured over, cut at kMaxGanttIntervals.
  std::map<int64_t, int64_t> per_step;  // step → intervals over every rank
  for (const auto& rank : timelines->timelines)
    for (const evidence::TimelineInterval& iv : rank) ++per_step[iv.step];
  std::set<int64_t> shown;
  int64_t kept = 0;
  for (int64_t s : bubble.steps_used) {
    if (kept + per_step[s] > kMaxGanttIntervals && !shown.empty()) break;
    kept += per_step[s];
    shown.insert(s);
  }
  d["steps"] = json(std::vector<int64_t>(shown.begin(), shown.end()));
  d["steps_omitted"] = static_cast<int64_t>(bubble.steps_used.size() - shown.size());
  d["max_intervals"] = kMaxGanttIntervals;

  std::map<std::pair<int, int64_t>, const evidence::RankStepTime*> times;
  for (const evidence::RankStepTime& t : bubble.rank_steps) times[{t.world_rank, t.step}] = &t;
  json ranks = json::array();
  for (size_t r = 0; r < timelines->timelines.size(); ++r) {
    std::map<int64_t, std::vector<const evidence::TimelineInterval*>> by_step;  // shown steps only
    for (const evidence::TimelineInterval& iv : timelines->timelines[r])
      if (shown.count(iv.step)) by_step[iv.step].push_back(&iv);
    json steps = json::array();
    for (int64_t s : shown) {
      const auto it = times.find({static_cast<int>(r), s});
      if (it == times.end()) continue;
      const evidence::RankStepTime& t = *it->second;
      // [kind, t0_us, t1_us, micro_batch, virtual_stage, unit], in time order, idle gaps included (unit: the
      // grad_sync intervals' unit, else −1).
      const std::vector<const evidence::TimelineInterval*>& mine = by_step[s];
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (const evidence::TimelineInterval* iv : mine) busy.push_back({iv->t0_us, iv->t1_us});
      const auto gaps = idle_gaps(busy, t.span_us);
      int64_t idle = 0;
      for (const auto& [a, b] : gaps) idle += b - a;
      std::vector<json> all;
      for (const evidence::TimelineInterval* iv : mine)
        all.push_back(json::array({iv->kind, iv->t0_us, iv->t1_us, iv->micro_batch, iv->virtual_stage, iv->unit}));
      for (const auto& [a, b] : gaps) all.push_back(json::array({"idle", a, b, -1, -1, -1}));
      std::stable_sort(all.begin(), all.end(), [](const json& a, const json& b) { return a[1] < b[1]; });
      steps.push_back({{"step", s},
                       {"span_us", t.span_us},
                       {"compute_us", t.compute_us},
                       {"comm_us", t.comm_us},
                       {"idle_us", idle},
                       {"bubble", t.bubble},
                       {"intervals", all}});
    }
    ranks.push_back({{"rank", r}, {"stage", timelines->places[r].stage}, {"steps", steps}});
  }
  d["ranks"] = std::move(ranks);
  v.data = std::move(d);
  return v;
}

View memory_view(const RunDir& run) {
  View v{.id = "memory",
         .title = "Memory per rank and category: measured vs predicted",
         .files = {run.label(evidence::kLedgerFile)}};
  auto ledger = read_json_file(run.paths().ledger());
  if (!ledger.ok()) {
    v.unreadable(run, evidence::kLedgerFile, ledger.status());
    return v;
  }
  const json& l = *ledger;
  json ranks = json::array();
  std::set<std::string> categories;
  for (const json& r : l.value("ranks", json::array())) {
    json cats = json::object();
    const json categories_of_rank = r.value("categories", json::object());
    for (const auto& [name, c] : categories_of_rank.items()) {
      categories.insert(name);
      cats[name] = {{"measured_peak", c.value("measured_peak", int64_t{0})},
                    {"predicted_peak", c.value("predicted_peak", int64_t{0})},
                    {"measured_live", c.value("measured_live", int64_t{0})},
                    {"predicted_live", c.value("predicted_live", int64_t{0})},
                    {"equal", c.value("equal", false)}};
    }
    // The largest named tensors by measured peak: where a category's bytes are.
    std::vector<std::pair<int64_t, std::string>> sizes;
    const json tensors = r.value("tensors", json::object());
    for (const auto& [name, t] : tensors.items()) sizes.push_back({t.value("measured_peak", int64_t{0}), name});
    std::sort(sizes.begin(), sizes.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    json top = json::array();
    for (size_t i = 0; i < sizes.size() && i < 8; ++i) {
      const json& t = tensors[sizes[i].second];
      top.push_back({{"name", sizes[i].second},
                     {"category", t.value("category", "")},
                     {"measured_peak", t.value("measured_peak", int64_t{0})},
                     {"predicted_peak", t.value("predicted_peak", int64_t{0})}});
    }
    const json total = r.value("total", json::object());
    ranks.push_back({{"rank", r.value("rank", -1)},
                     {"coords", r.value("coords", "")},
                     {"equal", r.value("equal", false)},
                     {"categories", cats},
                     {"total",
                      {{"measured_peak", total.value("measured_peak", int64_t{0})},
                       {"predicted_peak", total.value("predicted_peak", int64_t{0})},
                       {"measured_live", total.value("measured_live", int64_t{0})},
                       {"predicted_live", total.value("predicted_live", int64_t{0})}}},
                     {"largest_tensors", top}});
  }
  if (ranks.empty()) v.problems.push_back(run.label(evidence::kLedgerFile) + ": no \"ranks\"");
  v.data = {{"run", run.name},
            {"equal", l.value("equal", false)},
            {"max_peak_bytes", l.value("max_peak_bytes", int64_t{0})},
            {"budget_bytes", l.value("budget_bytes", int64_t{0})},
            {"within_budget", l.value("within_budget", true)},
            {"device_limit_bytes", nullptr},  // a plan's device memory (issue 15)
            {"categories", json(std::vector<std::string>(categories.begin(), categories.end()))},
            {"ranks", std::move(ranks)}};
  return v;
}

namespace {

// The traced and predicted traffic of a run in cells per (group, step bucket, phase) and totals per (group,
// phase): one step per bucket up to kMaxTrafficSteps steps, then consecutive steps summed so that the chart
// keeps at most that many bars (docs/report.md §Size).
struct TrafficCells {
  json cells = json::array(), totals = json::array();
  std::set<std::string> groups;
  size_t per_bucket = 0;
};
TrafficCells traffic_cells(const evidence::TraceReport& t) {
  TrafficCells out;
  std::set<int64_t> all_steps;
  for (const auto& [k, x] : t.traffic) all_steps.insert(k.step);
  for (const auto& [k, x] : t.predicted_traffic) all_steps.insert(k.step);
  const std::vector<int64_t> steps(all_steps.begin(), all_steps.end());
  const size_t per_bucket = (steps.size() + kMaxTrafficSteps - 1) / kMaxTrafficSteps;
  std::map<int64_t, std::pair<int64_t, int64_t>> bucket_of;  // step → (first, last) step of its bucket
  for (size_t i = 0; i < steps.size(); ++i) {
    const size_t b = per_bucket <= 1 || steps[i] < 0 ? i : i / per_bucket * per_bucket;
    const size_t e = per_bucket <= 1 || steps[i] < 0 ? i : std::min(steps.size(), b + per_bucket) - 1;
    bucket_of[steps[i]] = {steps[b], steps[e]};
  }
  struct Cell {
    int64_t last = 0, ops = 0, bytes = 0, pred_ops = 0, pred_bytes = 0;
    bool predicted = false;
  };
  std::map<std::tuple<std::string, int64_t, int>, Cell> buckets;  // (group, first step, phase)
  std::map<std::pair<std::string, int>, Cell> totals;             // (group, phase) over every step
  std::set<std::string> groups;
  for (const auto& [k, x] : t.traffic) {
    groups.insert(k.group);
    const auto [first, last] = bucket_of[k.step];
    for (Cell* c :
         {&buckets[{k.group, first, static_cast<int>(k.phase)}], &totals[{k.group, static_cast<int>(k.phase)}]}) {
      c->last = last;
      c->ops += x.ops;
      c->bytes += x.bytes;
    }
  }
  for (const auto& [k, x] : t.predicted_traffic) {
    groups.insert(k.group);
    const auto [first, last] = bucket_of[k.step];
    for (Cell* c :
         {&buckets[{k.group, first, static_cast<int>(k.phase)}], &totals[{k.group, static_cast<int>(k.phase)}]}) {
      c->last = last;
      c->pred_ops += x.ops;
      c->pred_bytes += x.bytes;
      c->predicted = true;
    }
  }
  const auto phase_text = [](int p) { return std::string(comm::phase_name(static_cast<comm::Phase>(p))); };
  json cells = json::array(), total_rows = json::array();
  for (const auto& [key, c] : buckets) {
    const auto& [group, first, phase] = key;
    cells.push_back({{"group", group},
                     {"step", first},
                     {"last_step", c.last},
                     {"phase", phase_text(phase)},
                     {"ops", c.ops},
                     {"bytes", c.bytes},
                     {"predicted_ops", c.predicted ? json(c.pred_ops) : json(nullptr)},
                     {"predicted_bytes", c.predicted ? json(c.pred_bytes) : json(nullptr)}});
  }
  for (const auto& [key, c] : totals)
    total_rows.push_back({{"group", key.first},
                          {"phase", phase_text(key.second)},
                          {"ops", c.ops},
                          {"bytes", c.bytes},
                          {"predicted_ops", c.predicted ? json(c.pred_ops) : json(nullptr)},
                          {"predicted_bytes", c.predicted ? json(c.pred_bytes) : json(nullptr)}});
  out.cells = std::move(cells);
  out.totals = std::move(total_rows);
  out.groups = std::move(groups);
  out.per_bucket = per_bucket;
  return out;
}

// Rank × rank: p2p payload from its sender to its receiver exactly; a rank's collective wire bytes (the ring
// volume the planner models) split evenly over the other members of the group. Null above kMaxMatrixRanks.
json traffic_matrix(const evidence::TraceReport& t) {
  int world = t.world_size;
  std::map<std::string, std::vector<int>> members;
  for (const auto& [key, x] : t.rank_collectives) members[key.second].push_back(key.first);
  for (const auto& [key, x] : t.p2p_sent) world = std::max({world, key.first + 1, key.second + 1});
  for (const auto& [key, x] : t.rank_collectives) world = std::max(world, key.first + 1);
  if (world > kMaxMatrixRanks) world = 0;  // the matrix is left out (docs/report.md §Size)
  std::vector<std::vector<int64_t>> p2p(world, std::vector<int64_t>(world, 0)), coll = p2p;
  for (const auto& [key, x] : t.p2p_sent)
    if (key.first >= 0 && key.second >= 0 && key.first < world && key.second < world)
      p2p[key.first][key.second] += x.bytes;
  for (const auto& [key, x] : t.rank_collectives) {
    const std::vector<int>& m = members[key.second];
    if (m.size() < 2 || key.first < 0 || key.first >= world) continue;
    const int64_t share = x.wire_bytes / static_cast<int64_t>(m.size() - 1);
    for (int peer : m)
      if (peer != key.first && peer < world) coll[key.first][peer] += share;
  }
  return world == 0 ? json(nullptr) : json{{"world", world}, {"p2p", p2p}, {"collective", coll}};
}

}  // namespace

View traffic_view(const std::vector<RunDir>& runs) {
  View v{.id = "traffic", .title = "Traffic: bytes per group, step and phase, traced vs predicted"};
  json out = json::array();
  for (const RunDir& run : runs) {
    v.files.push_back(run.dir_label(evidence::kTraceDir));
    v.files.push_back(run.label(evidence::kCommPredictedFile));
    auto report = evidence::check_trace_dir(run.path);
    if (!report.ok()) {
      v.unreadable(run, evidence::kTraceDir, report.status());
      continue;
    }
    const evidence::TraceReport& t = *report;
    const TrafficCells tc = traffic_cells(t);
    json group_totals = json::object();
    for (const auto& [g, x] : t.group_traffic)
      group_totals[g] = {{"ops", x.ops}, {"bytes", x.bytes}, {"wire_bytes", x.wire_bytes}};
    out.push_back({{"run", run.name},
                   {"records", t.records},
                   {"consistent", t.consistent()},
                   {"mismatches", t.mismatches.size()},
                   {"first_mismatches", first_messages(t.mismatches)},
                   {"prediction_found", t.prediction_found},
                   {"matches_prediction", t.matches_prediction()},
                   {"prediction_cells", t.prediction_cells},
                   {"prediction_mismatches", t.prediction_mismatches.size()},
                   {"first_prediction_mismatches", first_messages(t.prediction_mismatches)},
                   {"groups", json(std::vector<std::string>(tc.groups.begin(), tc.groups.end()))},
                   {"group_totals", group_totals},
                   {"steps_per_bar", static_cast<int64_t>(std::max<size_t>(tc.per_bucket, 1))},
                   {"cells", tc.cells},
                   {"totals", tc.totals},
                   {"matrix", traffic_matrix(t)}});
    if (!t.prediction_found)
      v.unreadable(run, evidence::kCommPredictedFile, not_found("no {}", evidence::kCommPredictedFile));
  }
  if (!out.empty()) v.data = {{"runs", out}};
  return v;
}

}  // namespace sp::report
