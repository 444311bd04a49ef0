// The "time" view (views.h): where each rank's step time went, by kind (core/time_split.h: GEMMs,
// attention, the other memory-bound kernels, communication, waiting, optimizer, evidence, other), from the
// split lines of timeline/ as evidence/bubble.h's reader returns them. Per rank: each step's split (the
// first kMaxSplitSteps) and the mean over the steps ≥ 1 (step 0 is warm-up: allocation, first touch),
// whose parts add up to the mean step as each step's parts add up to that step. The only arithmetic here
// is that mean.
#include <fmt/format.h>

#include <map>
#include <set>

#include "evidence/bubble.h"
#include "report/views.h"

namespace sp::report {
namespace {

// One rank's entry: its steps' splits and their mean over `used` (steps ≥ 1, or every step when only step 0 ran).
json rank_entry(int rank, int stage, const std::vector<evidence::StepTimeSplit>& splits) {
  bool later = false;
  for (const evidence::StepTimeSplit& s : splits) later = later || s.step >= 1;
  std::vector<double> mean(kTimeKinds + 1, 0.0);
  double mean_step = 0;
  int64_t used = 0;
  json steps = json::array();
  for (const evidence::StepTimeSplit& s : splits) {
    if (steps.size() < kMaxSplitSteps)
      steps.push_back(
          {{"step", s.step}, {"step_us", s.step_us}, {"us", std::vector<int64_t>(s.us.begin(), s.us.end())}});
    if (later && s.step < 1) continue;
    ++used;
    mean_step += static_cast<double>(s.step_us);
    for (size_t k = 0; k <= kTimeKinds; ++k) mean[k] += static_cast<double>(s.us[k]);
  }
  if (used > 0) {
    mean_step /= static_cast<double>(used);
    for (double& m : mean) m /= static_cast<double>(used);
  }
  return {{"rank", rank},          {"stage", stage}, {"steps", steps}, {"mean_us", mean}, {"mean_step_us", mean_step},
          {"steps_averaged", used}};
}

}  // namespace

View time_view(const RunDir& run) {
  View v{.id = "time",
         .title = "Where the time goes: each rank's step by kind",
         .files = {run.dir_label(evidence::kTimelineDir), run.label(evidence::kTopologyFile),
                   run.label(evidence::kContractFile)}};
  auto timelines = evidence::read_run_timelines(run.path);
  if (!timelines.ok()) {
    v.unreadable(run, evidence::kTimelineDir, timelines.status());
    return v;
  }
  json kinds = json::array();
  for (std::string_view k : kTimeKindNames) kinds.push_back(k);
  kinds.push_back(kOtherTime);
  json ranks = json::array();
  for (size_t r = 0; r < timelines->timelines.size(); ++r) {
    const std::vector<evidence::StepTimeSplit>& splits = timelines->splits[r];
    // Every step with intervals has its split (written after them): a missing one is a torn or older file.
    std::set<int64_t> with_split;
    for (const evidence::StepTimeSplit& s : splits) with_split.insert(s.step);
    std::set<int64_t> missing;
    for (const evidence::TimelineInterval& iv : timelines->timelines[r])
      if (!with_split.count(iv.step)) missing.insert(iv.step);
    if (!missing.empty()) {
      const std::string text = fmt::format(
          "{}: {} step(s) without a split line, the first step {}{}",
          run.dir_label(evidence::kTimelineDir) + evidence::rank_file_name(static_cast<int>(r)), missing.size(),
          *missing.begin(), splits.empty() ? " (written by a shardproof before the split existed?)" : "");
      (run.expected ? v.problems : v.notes).push_back(text);
    }
    ranks.push_back(rank_entry(static_cast<int>(r), timelines->places[r].stage, splits));
  }
  v.data = {{"run", run.name}, {"kinds", kinds}, {"max_steps", kMaxSplitSteps}, {"ranks", std::move(ranks)}};
  return v;
}

}  // namespace sp::report
