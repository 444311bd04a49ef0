// Pipeline bubble from timelines (bubble.h). The computation is a fold over intervals keyed by
// (rank, step); the stage aggregation is a mean over ranks then a median over steps. Reading a run's
// timeline files, contract and topology is bubble_inputs.cc.
#include "evidence/bubble.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "comm/topology.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"

namespace sp::evidence {
namespace {

using nlohmann::json;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double bubble_theory(const PipelineShape& s) {
  if (s.pp <= 1) return 0;
  const double p = s.pp, m = static_cast<double>(s.micro_batches);
  // ZB-H1 (Qi et al. 2023 §3.1) with equal F, B and W times and m ≥ p: each rank idles p − 1 of those units in a
  // step of 3m busy ones (its cool-down is filled by the deferred W passes; docs/compare.md §Bubble).
  if (s.schedule == "zb-h1") return (p - 1) / (3 * m + p - 1);
  const double v = s.schedule == "interleaved" ? s.virtual_stages : 1;
  return (p - 1) / (v * m + p - 1);
}

bool timeline_compute_kind(std::string_view k) {
  return k == "forward" || k == "backward" || k == "backward_input" || k == "backward_weight";
}

namespace {

// Per (rank, step): the end of the last interval, compute and comm sums.
struct Acc {
  int64_t end = 0, compute = 0, comm = 0;
};
using StepAccs = std::map<int64_t, std::vector<Acc>>;  // step -> per rank

StepAccs accumulate(const std::vector<std::vector<TimelineInterval>>& timelines, size_t world) {
  StepAccs by_step;
  for (size_t r = 0; r < world; ++r)
    for (const TimelineInterval& iv : timelines[r]) {
      std::vector<Acc>& accs = by_step[iv.step];
      if (accs.empty()) accs.resize(world);
      Acc& a = accs[r];
      a.end = std::max(a.end, iv.t1_us);
      const int64_t len = iv.t1_us - iv.t0_us;
      if (timeline_compute_kind(iv.kind))
        a.compute += len;
      else if (iv.kind == "send" || iv.kind == "recv" || iv.kind == "wait")
        a.comm += len;
    }
  return by_step;
}

// The steps measured: every step from 1 (step 0 holds the warm-up), or the only one recorded.
void choose_steps(const StepAccs& by_step, BubbleReport& rep) {
  for (const auto& [step, accs] : by_step)
    if (step >= 1 || by_step.size() == 1) rep.steps_used.push_back(step);
  if (rep.steps_used.empty() && !by_step.empty()) {
    rep.steps_used.push_back(by_step.begin()->first);  // only steps ≤ 0 recorded
  }
  if (by_step.size() == 1)
    rep.warnings.push_back("only one step recorded: it includes warm-up (allocation, first touch)");
  if (by_step.empty()) rep.warnings.push_back("the timeline holds no intervals");
}

// One stage in one step: the mean over its ranks.
struct StageStep {
  double span = 0, compute = 0, comm = 0, bubble = 0;
};
// Per stage: its ranks, its measured steps and the stage-cost model's bubble per step.
struct StageSeries {
  std::vector<std::vector<StageStep>> steps;
  std::vector<int> ranks;
  std::vector<std::vector<double>> model_bubbles;
};

// Every used step: each rank's span (its pipeline group's), compute, comm and bubble (rep.rank_steps), each
// stage's mean, and the stage-cost model's bubble from the stages' compute.
StageSeries measure_stages(const StepAccs& by_step, const std::vector<PipelinePlace>& places,
                           const PipelineShape& shape, size_t world, BubbleReport& rep) {
  int groups = 0;
  for (size_t r = 0; r < world; ++r) groups = std::max(groups, places[r].group + 1);
  const int stages = std::max(1, shape.pp);
  StageSeries out;
  out.steps.resize(static_cast<size_t>(stages));
  out.ranks.assign(static_cast<size_t>(stages), 0);
  out.model_bubbles.resize(static_cast<size_t>(stages));
  for (size_t r = 0; r < world; ++r)
    if (places[r].stage >= 0 && places[r].stage < stages) ++out.ranks[static_cast<size_t>(places[r].stage)];
  for (int64_t step : rep.steps_used) {
    const std::vector<Acc>& accs = by_step.at(step);
    std::vector<int64_t> span(static_cast<size_t>(groups), 0);
    for (size_t r = 0; r < world; ++r) {
      int64_t& s = span[static_cast<size_t>(places[r].group)];
      s = std::max(s, accs[r].end);
    }
    std::vector<StageStep> sum(static_cast<size_t>(stages));
    for (size_t r = 0; r < world; ++r) {
      const int st = places[r].stage;
      if (st < 0 || st >= stages) continue;
      RankStepTime t;
      t.world_rank = static_cast<int>(r);
      t.stage = st;
      t.step = step;
      t.span_us = span[static_cast<size_t>(places[r].group)];
      t.compute_us = accs[r].compute;
      t.comm_us = accs[r].comm;
      t.bubble = t.span_us > 0 ? 1.0 - static_cast<double>(t.compute_us) / static_cast<double>(t.span_us) : 0.0;
      rep.rank_steps.push_back(t);
      StageStep& ss = sum[static_cast<size_t>(st)];
      ss.span += static_cast<double>(t.span_us);
      ss.compute += static_cast<double>(t.compute_us);
      ss.comm += static_cast<double>(t.comm_us);
      ss.bubble += t.bubble;
    }
    std::vector<double> cost(static_cast<size_t>(stages), 0);  // mean compute per stage this step
    for (int st = 0; st < stages; ++st) {
      const int n = out.ranks[static_cast<size_t>(st)];
      if (n == 0) continue;
      StageStep ss = sum[static_cast<size_t>(st)];
      ss.span /= n;
      ss.compute /= n;
      ss.comm /= n;
      ss.bubble /= n;
      out.steps[static_cast<size_t>(st)].push_back(ss);
      cost[static_cast<size_t>(st)] = ss.compute;
    }
    // Stage-cost model: c_i = cost_i / m; span = Σ c_i + (m−1)·max c_i; bubble_i = 1 − m·c_i / span.
    // (The one-backward model of GPipe and 1F1B; none for interleaved or ZB-H1.)
    if (shape.schedule != "zb-h1" && (shape.schedule != "interleaved" || shape.virtual_stages == 1)) {
      const double m = static_cast<double>(std::max<int64_t>(1, shape.micro_batches));
      double total = 0, peak = 0;
      for (double c : cost) {
        total += c / m;
        peak = std::max(peak, c / m);
      }
      const double model_span = total + (m - 1) * peak;
      for (int st = 0; st < stages; ++st)
        if (model_span > 0)
          out.model_bubbles[static_cast<size_t>(st)].push_back(1.0 - cost[static_cast<size_t>(st)] / model_span);
    }
  }
  return out;
}

// Each stage's medians over the steps, and the report's means over the stages.
void summarize_stages(const StageSeries& series, BubbleReport& rep) {
  double sum_bubble = 0, sum_compute = 0, sum_comm = 0, sum_span = 0;
  int counted = 0;
  rep.measured_min = 1;
  rep.measured_max = 0;
  for (size_t i = 0; i < series.steps.size(); ++i) {
    const int st = static_cast<int>(i);
    const std::vector<StageStep>& v = series.steps[i];
    StageBubble sb;
    sb.stage = st;
    sb.ranks = series.ranks[i];
    if (v.empty()) {
      rep.warnings.push_back(fmt::format("stage {} has no ranks or no intervals", st));
      rep.stages.push_back(sb);
      continue;
    }
    std::vector<double> spans, computes, comms, bubbles;
    for (const StageStep& s : v) {
      spans.push_back(s.span / 1000.0);
      computes.push_back(s.compute / 1000.0);
      comms.push_back(s.comm / 1000.0);
      bubbles.push_back(s.bubble);
    }
    sb.span_ms = median(spans);
    sb.compute_ms = median(computes);
    sb.comm_ms = median(comms);
    sb.bubble = median(bubbles);
    sb.bubble_min = *std::min_element(bubbles.begin(), bubbles.end());
    sb.bubble_max = *std::max_element(bubbles.begin(), bubbles.end());
    const std::vector<double>& mb = series.model_bubbles[i];
    sb.model_bubble = mb.empty() ? -1.0 : median(mb);
    rep.stages.push_back(sb);
    sum_bubble += sb.bubble;
    if (sb.span_ms > 0) {
      sum_compute += sb.compute_ms / sb.span_ms;
      sum_comm += sb.comm_ms / sb.span_ms;
    }
    sum_span += sb.span_ms;
    rep.measured_min = std::min(rep.measured_min, sb.bubble);
    rep.measured_max = std::max(rep.measured_max, sb.bubble);
    ++counted;
  }
  if (counted > 0) {
    rep.measured = sum_bubble / counted;
    rep.compute_fraction = sum_compute / counted;
    rep.comm_fraction = sum_comm / counted;
    rep.span_ms = sum_span / counted;
  } else {
    rep.measured_min = rep.measured_max = 0;
  }
}

}  // namespace

BubbleReport bubble_of_timelines(const std::vector<std::vector<TimelineInterval>>& timelines,
                                 const std::vector<PipelinePlace>& places, const PipelineShape& shape) {
  BubbleReport rep;
  rep.shape = shape;
  rep.theory = bubble_theory(shape);
  const size_t world = std::min(timelines.size(), places.size());
  const StepAccs by_step = accumulate(timelines, world);
  choose_steps(by_step, rep);
  summarize_stages(measure_stages(by_step, places, shape, world, rep), rep);
  return rep;
}

Result<BubbleReport> bubble_of_run(const std::string& dir) {
  SP_ASSIGN_OR_RETURN(const RunTimelines run, read_run_timelines(dir));
  return bubble_of_timelines(run.timelines, run.places, run.shape);
}

json BubbleReport::to_json() const {
  json stages_j = json::array();
  for (const StageBubble& s : stages)
    stages_j.push_back({{"stage", s.stage},
                        {"ranks", s.ranks},
                        {"span_ms", s.span_ms},
                        {"compute_ms", s.compute_ms},
                        {"comm_ms", s.comm_ms},
                        {"bubble", s.bubble},
                        {"bubble_min", s.bubble_min},
                        {"bubble_max", s.bubble_max},
                        {"model_bubble", s.model_bubble < 0 ? json(nullptr) : json(s.model_bubble)}});
  json ranks_j = json::array();
  for (const RankStepTime& t : rank_steps)
    ranks_j.push_back({{"rank", t.world_rank},
                       {"stage", t.stage},
                       {"step", t.step},
                       {"span_us", t.span_us},
                       {"compute_us", t.compute_us},
                       {"comm_us", t.comm_us},
                       {"bubble", t.bubble}});
  return {{"dp", shape.dp},
          {"tp", shape.tp},
          {"pp", shape.pp},
          {"schedule", shape.schedule},
          {"virtual_stages", shape.virtual_stages},
          {"micro_batches", shape.micro_batches},
          {"theory", theory},
          {"measured", measured},
          {"measured_min", measured_min},
          {"measured_max", measured_max},
          {"compute_fraction", compute_fraction},
          {"comm_fraction", comm_fraction},
          {"span_ms", span_ms},
          {"steps_used", steps_used},
          {"stages", stages_j},
          {"rank_steps", ranks_j},
          {"warnings", warnings}};
}

std::string BubbleReport::to_markdown() const {
  std::string out = fmt::format(
      "pipeline: pp {} × dp {} × tp {}, schedule {}{}, m = {} micro-batches per dp rank; "
      "steps used: {}\n\n",
      shape.pp, shape.dp, shape.tp, shape.schedule,
      shape.schedule == "interleaved" ? fmt::format(" (v = {})", shape.virtual_stages) : "", shape.micro_batches,
      steps_used.size());
  out += "| stage | ranks | span ms | compute ms | p2p ms | bubble measured (min–max) | stage-cost model | theory |\n";
  out += "|---:|---:|---:|---:|---:|---|---:|---:|\n";
  for (const StageBubble& s : stages)
    out += fmt::format("| {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.3f} ({:.3f}–{:.3f}) | {} | {:.3f} |\n", s.stage,
                       s.ranks, s.span_ms, s.compute_ms, s.comm_ms, s.bubble, s.bubble_min, s.bubble_max,
                       s.model_bubble < 0 ? std::string("–") : fmt::format("{:.3f}", s.model_bubble), theory);
  out += fmt::format("\nmean over stages: measured {:.3f}, theory {:.3f} (difference {:+.3f})\n", measured, theory,
                     measured - theory);
  for (const std::string& w : warnings) out += "warning: " + w + "\n";
  return out;
}

}  // namespace sp::evidence
