#include "plan/schedule.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"

namespace sp::plan {
namespace {

std::vector<PipeAction> gpipe(int64_t m) {
  std::vector<PipeAction> a;
  for (int64_t i = 0; i < m; ++i) a.push_back({true, 0, i});
  for (int64_t i = 0; i < m; ++i) a.push_back({false, 0, i});
  return a;
}

std::vector<PipeAction> one_f_one_b(int r, int p, int64_t m) {
  std::vector<PipeAction> a;
  const int64_t warmup = std::min<int64_t>(p - r - 1, m);
  // Warm-up: fill the pipeline.
  for (int64_t i = 0; i < warmup; ++i) a.push_back({true, 0, i});
  // Steady state: one forward, one backward.
  for (int64_t i = 0; i < m - warmup; ++i) {
    a.push_back({true, 0, warmup + i});
    a.push_back({false, 0, i});
  }
  // Cool-down: drain the remaining backwards.
  for (int64_t i = m - warmup; i < m; ++i) a.push_back({false, 0, i});
  return a;
}

// ZB-H1: 1F1B's list with every backward as B; rank r runs W(k − r) right after B(k), then the r
// deferred W passes after the last B (they fill the cool-down, where rank r waits for gradients).
// Rank 0 defers nothing: its W(k) directly follows its B(k), and having no upstream stage it sends nothing
// between them, so B(k)·W(k) is the full backward (the same products and leaf order, llama_stage_wgrad.cc)
// and its list is 1F1B's rank 0's: it keeps no split-backward state (docs/memory.md §"ZB-H1").
std::vector<PipeAction> zb_h1(int r, int p, int64_t m) {
  if (r == 0) return one_f_one_b(r, p, m);
  std::vector<PipeAction> a;
  int64_t inputs = 0, weights = 0;
  for (PipeAction x : one_f_one_b(r, p, m)) {
    if (x.forward) {
      a.push_back(x);
      continue;
    }
    x.pass = BackwardPass::kInput;
    a.push_back(x);
    if (++inputs > r) a.push_back({false, 0, weights++, BackwardPass::kWeight});
  }
  while (weights < m) a.push_back({false, 0, weights++, BackwardPass::kWeight});
  return a;
}

std::vector<PipeAction> interleaved(int r, int p, int v, int64_t m) {
  const int64_t total = m * v;
  const int64_t group = static_cast<int64_t>(p) * v;
  auto chunk_of = [&](int64_t k, bool fwd) {
    const int c = static_cast<int>((k % group) / p);
    return fwd ? c : v - 1 - c;
  };
  auto mb_of = [&](int64_t k) { return (k / group) * p + k % p; };
  int64_t warmup;
  if (m == p) {
    warmup = total;
  } else {
    warmup = std::min<int64_t>(static_cast<int64_t>(p - r - 1) * 2 + static_cast<int64_t>(v - 1) * p, total);
  }
  std::vector<PipeAction> a;
  // Warm-up forwards.
  for (int64_t k = 0; k < warmup; ++k) a.push_back({true, chunk_of(k, true), mb_of(k)});
  // Steady state: forward k + warmup, backward k.
  const int64_t remaining = total - warmup;
  for (int64_t k = 0; k < remaining; ++k) {
    a.push_back({true, chunk_of(k + warmup, true), mb_of(k + warmup)});
    a.push_back({false, chunk_of(k, false), mb_of(k)});
  }
  // Cool-down backwards.
  for (int64_t k = remaining; k < total; ++k) a.push_back({false, chunk_of(k, false), mb_of(k)});
  return a;
}

}  // namespace

std::vector<PipeAction> schedule_actions(config::Schedule s, int r, int p, int v, int64_t m) {
  SP_CHECK(r >= 0 && r < p && m >= 1 && v >= 1, "schedule_actions(r={}, p={}, v={}, m={})", r, p, v, m);
  switch (s) {
    case config::Schedule::kGpipe:
      return gpipe(m);
    case config::Schedule::k1F1B:
      return one_f_one_b(r, p, m);
    case config::Schedule::kInterleaved:
      return interleaved(r, p, v, m);
    case config::Schedule::kZbH1:
      return zb_h1(r, p, m);
  }
  return {};
}

std::string schedule_string(const std::vector<PipeAction>& actions) {
  std::string s;
  for (const PipeAction& a : actions)
    s += fmt::format("{}{}{}.{}", s.empty() ? "" : " ", a.forward ? 'F' : (a.weight() ? 'W' : 'B'), a.virtual_stage,
                     a.micro_batch);
  return s;
}

bool splits_backward(const std::vector<PipeAction>& actions) {
  return std::any_of(actions.begin(), actions.end(), [](const PipeAction& a) { return a.weight(); });
}

std::vector<int64_t> peak_in_flight(const std::vector<PipeAction>& actions, int v) {
  std::vector<int64_t> live(static_cast<size_t>(v), 0), peak(static_cast<size_t>(v), 0);
  for (const PipeAction& a : actions) {
    auto& l = live[static_cast<size_t>(a.virtual_stage)];
    l += a.forward ? 1 : (a.frees_slot() ? -1 : 0);
    peak[static_cast<size_t>(a.virtual_stage)] = std::max(peak[static_cast<size_t>(a.virtual_stage)], l);
  }
  return peak;
}

}  // namespace sp::plan
