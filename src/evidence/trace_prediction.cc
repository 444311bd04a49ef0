#include "evidence/trace_prediction.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "evidence/comm_prediction.h"

namespace sp::evidence {
namespace {

using Cell = std::tuple<int64_t, int, std::string, std::string>;  // step, phase order, group, phase

// A run of consecutive steps longer than this without one traced record on a rank is reported as one
// mismatch instead of cell by cell (so a damaged step number cannot make the check walk 2^40 steps).
constexpr int64_t kMaxExpandedGap = 4096;

bool compared_phase(std::string_view phase) { return phase != "setup" && phase != "checkpoint"; }

int phase_order(const std::string& name) {
  const auto p = comm::phase_from_name(name);
  return p ? static_cast<int>(*p) : 99;
}

// One rank's cells: what it traced (ops, bytes and the first start time per cell) and what was predicted.
struct RankCells {
  std::map<Cell, TrafficCell> traced, want;
  std::map<Cell, int64_t> when;
  std::set<int64_t> traced_steps;
};

RankCells traced_cells(const RankTrace& rt) {
  RankCells out;
  for (const comm::TraceRecord& r : rt.records) {
    const std::string phase(comm::phase_name(r.phase));
    if (!compared_phase(phase)) continue;
    const Cell c{r.step, phase_order(phase), r.group, phase};
    TrafficCell& n = out.traced[c];
    ++n.ops;
    n.bytes += r.bytes;
    if (!out.when.count(c)) out.when[c] = r.t_start_us;
    out.traced_steps.insert(r.step);
  }
  return out;
}

// The predicted cells of every step from the first traced one (over all ranks) to this rank's last: traced
// steps, and the steps between them that this rank did not trace at all (a long gap is one mismatch).
void expect_cells(const CommPrediction& prediction, int rank, int64_t first_step, RankCells& cells,
                  TraceReport& report) {
  const int64_t run_steps = prediction.schedule.steps;
  auto expect_step = [&](int64_t step) {
    for (const auto& [key, c] : *prediction.step(rank, step)) {
      if (!compared_phase(key.second)) continue;
      cells.want[{step, phase_order(key.second), key.first, key.second}] = c;
      if (const auto p = comm::phase_from_name(key.second)) {  // the traffic view's predicted column
        Traffic& sum = report.predicted_traffic[{key.first, step, *p}];
        sum.ops += c.ops;
        sum.bytes += c.bytes;
      }
    }
  };
  int64_t next = first_step;
  for (const int64_t s : cells.traced_steps) {
    if (s - next > kMaxExpandedGap) {
      // Every training step issues at least the loss all_reduce, so a gap inside the run is a mismatch.
      const int64_t lo = std::max<int64_t>(next, -1), hi = std::min(s - 1, run_steps - 1);
      TraceMismatch m{
          .kind = "prediction", .ranks = {rank}, .field = "ops", .expected = "records in every step", .actual = "none"};
      m.step = lo;
      m.message = fmt::format("rank {}, steps {}..{}: no traced records in {} predicted steps", rank, lo, hi,
                              std::max<int64_t>(hi - lo + 1, 0));
      if (hi >= lo) report.prediction_mismatches.push_back(std::move(m));
    } else {
      for (int64_t g = next; g < s; ++g) expect_step(g);
    }
    expect_step(s);
    next = s + 1;
  }
}

// Traced against predicted, cell by cell. A run that ended early (a failed check, a crash,
// stop_on_divergence): what this rank never reached is not a prediction mismatch (other views report the
// ending). Reached = any record in that step and phase; a partly traced cell is still compared, except in
// the step where a stopped job killed the rank: there, fewer ops and bytes than predicted are the ops the
// stop cut off (in flight or not yet issued), never more.
void compare_cells(const RankCells& rc, int rank, int64_t run_steps, bool stopped, TraceReport& report) {
  const int64_t last_step = rc.traced_steps.empty() ? -2 : *rc.traced_steps.rbegin();
  std::map<Cell, std::pair<TrafficCell, TrafficCell>> cells;  // traced, predicted
  for (const auto& [c, n] : rc.traced) cells[c].first = n;
  for (const auto& [c, n] : rc.want) cells[c].second = n;
  int64_t unreached = 0;
  for (const auto& [c, tp] : cells) {
    const auto& [got, expect] = tp;
    const auto& [step, order, group, phase] = c;
    if (step == last_step && got.ops < expect.ops && got.bytes <= expect.bytes && (got.ops == 0 || stopped)) {
      ++unreached;
      continue;
    }
    ++report.prediction_cells;
    if (got == expect) continue;
    TraceMismatch m{.kind = "prediction",
                    .group = group,
                    .ranks = {rank},
                    .field = got.ops != expect.ops ? "ops" : "bytes",
                    .expected = fmt::format("{} ops, {} bytes", expect.ops, expect.bytes),
                    .actual = fmt::format("{} ops, {} bytes", got.ops, got.bytes)};
    m.step = step;
    m.phase = phase;
    m.t_us = rc.when.count(c) ? rc.when.at(c) : 0;
    m.message = fmt::format("rank {}, step {}, group '{}', phase {}: traced {}, predicted {}", rank, step, group, phase,
                            m.actual, m.expected);
    report.prediction_mismatches.push_back(std::move(m));
  }
  const int64_t steps_after = std::max<int64_t>(0, run_steps - 1 - std::max<int64_t>(last_step, -1));
  if (unreached > 0 || steps_after > 0)
    report.warnings.push_back(fmt::format(
        "rank {}: the trace ends in step {} of {}; {}{}{}{} never reached and not compared", rank, last_step, run_steps,
        steps_after > 1    ? fmt::format("the {} steps after it", steps_after)
        : steps_after == 1 ? std::string("the step after it")
                           : std::string(),
        unreached > 0 && steps_after > 0 ? " and " : "",
        unreached > 0 ? fmt::format("{} predicted cells of that step (or their ops the stop cut off)", unreached) : "",
        unreached + steps_after > 1 ? " were" : " was"));  // "…; the 3 steps after it were never reached …"
}

}  // namespace

void compare_with_prediction(const std::vector<RankTrace>& ranks, const nlohmann::json& predicted,
                             TraceReport& report) {
  report.prediction_found = true;
  auto malformed = [&](const std::string& what) {
    report.prediction_mismatches.push_back(
        {.kind = "prediction", .message = fmt::format("comm_predicted.json: {}", what)});
  };
  const Result<CommPrediction> parsed = parse_comm_prediction(predicted, "comm_predicted.json");
  if (!parsed.ok()) return malformed(parsed.status().message());
  const CommPrediction& prediction = *parsed;
  const int64_t run_steps = prediction.schedule.steps;

  // The first traced step over all ranks: a resumed run's traces start at its checkpoint. A job stopped by a
  // failed check or the watchdog (a record marked aborted or timed_out) killed its ranks mid-step.
  int64_t first_step = INT64_MAX;
  bool stopped = false;
  for (const RankTrace& rt : ranks)
    for (const comm::TraceRecord& r : rt.records) {
      if (compared_phase(comm::phase_name(r.phase))) first_step = std::min(first_step, r.step);
      stopped = stopped || r.aborted || r.timed_out;
    }

  for (const RankTrace& rt : ranks) {
    if (rt.unreadable) continue;  // reported by the consistency check
    if (prediction.step(rt.world_rank, -1) == nullptr) {
      malformed(fmt::format("no entry for world rank {}", rt.world_rank));
      continue;
    }
    RankCells cells = traced_cells(rt);
    expect_cells(prediction, rt.world_rank, first_step, cells, report);
    compare_cells(cells, rt.world_rank, run_steps, stopped, report);
  }
  std::stable_sort(report.prediction_mismatches.begin(), report.prediction_mismatches.end(),
                   [](const TraceMismatch& a, const TraceMismatch& b) {
                     return std::make_tuple(a.step, phase_order(a.phase), a.ranks.empty() ? -1 : a.ranks[0]) <
                            std::make_tuple(b.step, phase_order(b.phase), b.ranks.empty() ? -1 : b.ranks[0]);
                   });
}

}  // namespace sp::evidence
