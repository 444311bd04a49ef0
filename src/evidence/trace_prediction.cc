#include "evidence/trace_prediction.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>

namespace sp::evidence {
namespace {

using Cell = std::tuple<int64_t, int, std::string, std::string>;  // step, phase order, group, phase
struct Count {
  int64_t ops = 0, bytes = 0;
  bool operator==(const Count&) const = default;
};

bool compared_phase(std::string_view phase) { return phase != "setup" && phase != "checkpoint"; }

int phase_order(const std::string& name) {
  const auto p = comm::phase_from_name(name);
  return p ? static_cast<int>(*p) : 99;
}

}  // namespace

void compare_with_prediction(const std::vector<RankTrace>& ranks, const nlohmann::json& predicted,
                             TraceReport& report) {
  report.prediction_found = true;
  auto malformed = [&](const std::string& what) {
    report.prediction_mismatches.push_back(
        {.kind = "prediction", .message = fmt::format("comm_predicted.json: {}", what)});
  };
  if (!predicted.is_object() || !predicted.contains("ranks") || !predicted["ranks"].is_array())
    return malformed("no \"ranks\" array");
  std::map<int, const nlohmann::json*> by_rank;
  for (const nlohmann::json& r : predicted["ranks"]) {
    if (!r.is_object() || !r.contains("rank") || !r["rank"].is_number_integer() || !r.contains("steps") ||
        !r["steps"].is_object())
      return malformed("a \"ranks\" entry lacks \"rank\" or \"steps\"");
    by_rank[r["rank"].get<int>()] = &r["steps"];
  }
  // The first traced step over all ranks: a resumed run's traces start at its checkpoint.
  int64_t first_step = INT64_MAX;
  for (const RankTrace& rt : ranks)
    for (const comm::TraceRecord& r : rt.records)
      if (compared_phase(comm::phase_name(r.phase))) first_step = std::min(first_step, r.step);

  for (const RankTrace& rt : ranks) {
    if (rt.unreadable) continue;  // reported by the consistency check
    std::map<Cell, Count> traced, want;
    std::map<Cell, int64_t> when;
    for (const comm::TraceRecord& r : rt.records) {
      const std::string phase(comm::phase_name(r.phase));
      if (!compared_phase(phase)) continue;
      const Cell c{r.step, phase_order(phase), r.group, phase};
      Count& n = traced[c];
      ++n.ops;
      n.bytes += r.bytes;
      if (!when.count(c)) when[c] = r.t_start_us;
    }
    const auto it = by_rank.find(rt.world_rank);
    if (it == by_rank.end()) {
      malformed(fmt::format("no entry for world rank {}", rt.world_rank));
      continue;
    }
    for (const auto& [step_text, groups] : it->second->items()) {
      int64_t step = 0;
      try {
        step = std::stoll(step_text);
      } catch (...) {
        malformed(fmt::format("rank {}: step key '{}' is not an integer", rt.world_rank, step_text));
        continue;
      }
      if (step < first_step || !groups.is_object()) continue;
      for (const auto& [group, phases] : groups.items())
        for (const auto& [phase, v] : phases.items()) {
          if (!compared_phase(phase)) continue;
          want[{step, phase_order(phase), group, phase}] = {v.value("ops", int64_t{0}), v.value("bytes", int64_t{0})};
          if (const auto p = comm::phase_from_name(phase)) {
            Traffic& sum = report.predicted_traffic[{group, step, *p}];
            sum.ops += v.value("ops", int64_t{0});
            sum.bytes += v.value("bytes", int64_t{0});
          }
        }
    }
    std::map<Cell, std::pair<Count, Count>> cells;  // traced, predicted
    for (const auto& [c, n] : traced) cells[c].first = n;
    for (const auto& [c, n] : want) cells[c].second = n;
    // A run that ended early (a failed check, a crash, stop_on_divergence): what this rank never
    // reached is not a prediction mismatch (other views report the ending). Reached = any record
    // in that step and phase; a partly traced cell is still compared.
    int64_t last_step = -2;
    for (const comm::TraceRecord& r : rt.records)
      if (compared_phase(comm::phase_name(r.phase))) last_step = std::max(last_step, r.step);
    int64_t unreached = 0;
    for (const auto& [c, tp] : cells) {
      const auto& [got, expect] = tp;
      const auto& [step, order, group, phase] = c;
      if (step > last_step || (step == last_step && got.ops == 0 && expect.ops > 0)) {
        ++unreached;
        continue;
      }
      ++report.prediction_cells;
      if (got == expect) continue;
      TraceMismatch m{.kind = "prediction", .group = group, .ranks = {rt.world_rank},
                      .field = got.ops != expect.ops ? "ops" : "bytes",
                      .expected = fmt::format("{} ops, {} bytes", expect.ops, expect.bytes),
                      .actual = fmt::format("{} ops, {} bytes", got.ops, got.bytes)};
      m.step = step;
      m.phase = phase;
      m.t_us = when.count(c) ? when[c] : 0;
      m.message = fmt::format("rank {}, step {}, group '{}', phase {}: traced {}, predicted {}", rt.world_rank, step,
                              group, phase, m.actual, m.expected);
      report.prediction_mismatches.push_back(std::move(m));
    }
    if (unreached > 0)
      report.warnings.push_back(fmt::format("rank {}: the trace ends in step {}; {} predicted cells after that point "
                                            "were never reached and are not compared",
                                            rt.world_rank, last_step, unreached));
  }
  std::stable_sort(report.prediction_mismatches.begin(), report.prediction_mismatches.end(),
                   [](const TraceMismatch& a, const TraceMismatch& b) {
                     return std::make_tuple(a.step, phase_order(a.phase), a.ranks.empty() ? -1 : a.ranks[0]) <
                            std::make_tuple(b.step, phase_order(b.phase), b.ranks.empty() ? -1 : b.ranks[0]);
                   });
}

}  // namespace sp::evidence
