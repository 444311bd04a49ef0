#include "planner/pipeline_sim.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/check.h"
#include "plan/schedule.h"

namespace sp::planner {
namespace {

double weight_seconds(const PipelineTimes& t, size_t chunk) {
  return t.weight_s.empty() ? t.backward_s[chunk] / 2 : t.weight_s[chunk];
}

}  // namespace

PipelineSimulation simulate_pipeline(const PipelineTimes& t) {
  const int p = t.pp, v = t.virtual_stages, chunks = p * v;
  SP_CHECK(p >= 1 && v >= 1 && t.micro_batches >= 1, "pipeline simulation: pp {}, v {}, m {}", p, v, t.micro_batches);
  SP_CHECK(static_cast<int>(t.forward_s.size()) == chunks && static_cast<int>(t.backward_s.size()) == chunks,
           "pipeline simulation needs one duration per chunk ({})", chunks);
  const auto m = static_cast<size_t>(t.micro_batches);
  constexpr double kNotYet = std::numeric_limits<double>::infinity();
  // End times of every chunk's forward and backward of every micro-batch.
  std::vector<std::vector<double>> fwd_end(static_cast<size_t>(chunks), std::vector<double>(m, kNotYet));
  std::vector<std::vector<double>> bwd_end = fwd_end;
  std::vector<std::vector<plan::PipeAction>> actions;
  for (int r = 0; r < p; ++r) actions.push_back(plan::schedule_actions(t.schedule, r, p, v, t.micro_batches));
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<double> free_at(static_cast<size_t>(p), 0);
  PipelineSimulation out;
  out.busy_s.assign(static_cast<size_t>(p), 0);
  size_t left = 0;
  for (const auto& a : actions) left += a.size();
  while (left > 0) {
    bool progressed = false;
    for (int r = 0; r < p; ++r) {
      const auto ri = static_cast<size_t>(r);
      while (next[ri] < actions[ri].size()) {
        const plan::PipeAction& a = actions[ri][next[ri]];
        const int c = a.virtual_stage * p + r;
        const auto ci = static_cast<size_t>(c), mb = static_cast<size_t>(a.micro_batch);
        double ready = 0;
        if (a.forward && c > 0) ready = fwd_end[ci - 1][mb] + t.transfer_s;
        if (a.input_grad()) ready = c + 1 < chunks ? bwd_end[ci + 1][mb] + t.transfer_s : fwd_end[ci][mb];
        if (a.weight()) ready = bwd_end[ci][mb];  // ZB-H1's W follows its own B
        if (ready == kNotYet) break;              // its input has not been produced yet: another rank goes first
        const double w = weight_seconds(t, ci);
        const double d = a.forward                              ? t.forward_s[ci]
                         : a.weight()                           ? w
                         : a.pass == plan::BackwardPass::kInput ? t.backward_s[ci] - w
                                                                : t.backward_s[ci];
        const double start = std::max(free_at[ri], ready), end = start + d;
        if (t.record) out.actions.push_back({r, a.virtual_stage, a.micro_batch, a.forward, start, end, a.weight()});
        if (!a.weight()) (a.forward ? fwd_end : bwd_end)[ci][mb] = end;
        free_at[ri] = end;
        out.busy_s[ri] += d;
        ++next[ri];
        --left;
        progressed = true;
      }
    }
    SP_CHECK(progressed, "pipeline simulation: the schedule deadlocks ({} actions left)", left);
  }
  out.makespan_s = *std::max_element(free_at.begin(), free_at.end());
  const double mean_busy = std::accumulate(out.busy_s.begin(), out.busy_s.end(), 0.0) / p;
  out.bubble_fraction = out.makespan_s > 0 ? 1 - mean_busy / out.makespan_s : 0;
  return out;
}

}  // namespace sp::planner
