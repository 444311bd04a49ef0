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
  }
  return {};
}

std::string schedule_string(const std::vector<PipeAction>& actions) {
  std::string s;
  for (const PipeAction& a : actions)
    s += fmt::format("{}{}{}.{}", s.empty() ? "" : " ", a.forward ? 'F' : 'B', a.virtual_stage, a.micro_batch);
  return s;
}

std::vector<int64_t> peak_in_flight(const std::vector<PipeAction>& actions, int v) {
  std::vector<int64_t> live(static_cast<size_t>(v), 0), peak(static_cast<size_t>(v), 0);
  for (const PipeAction& a : actions) {
    auto& l = live[static_cast<size_t>(a.virtual_stage)];
    l += a.forward ? 1 : -1;
    peak[static_cast<size_t>(a.virtual_stage)] = std::max(peak[static_cast<size_t>(a.virtual_stage)], l);
  }
  return peak;
}

}  // namespace sp::plan
