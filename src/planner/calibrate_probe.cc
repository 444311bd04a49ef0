#include "planner/calibrate_probe.h"

#include <algorithm>

#include "core/timer.h"
#include "tensor/float16.h"

namespace sp::planner::calibration_detail {
namespace {
constexpr int kRounds = 3;
volatile uint64_t g_sink = 0;
}  // namespace

std::vector<double> median_seconds(const std::vector<std::function<void()>>& probes, double min_seconds) {
  std::vector<std::vector<double>> t(probes.size());
  for (const auto& fn : probes) fn();  // warm-up
  for (int round = 0; round < kRounds; ++round)
    for (size_t i = 0; i < probes.size(); ++i) {
      ThreadCpuStopwatch total;
      do {
        ThreadCpuStopwatch one;
        probes[i]();
        t[i].push_back(one.seconds());
      } while (total.seconds() < min_seconds / kRounds);
    }
  std::vector<double> out;
  for (auto& v : t) {
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
    out.push_back(v[v.size() / 2]);
  }
  return out;
}

void do_not_optimize(uint64_t v) { g_sink = v; }

std::vector<float> filled(int64_t n, float base) {
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(n, 1)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i % 13) * 0.0625f;
  return v;
}
std::vector<uint16_t> filled16(int64_t n, DType t) {
  const std::vector<float> f = filled(n, 0.25f);
  std::vector<uint16_t> h(f.size());
  float16_from_f32(h.data(), f.data(), static_cast<int64_t>(f.size()), t);
  return h;
}

}  // namespace sp::planner::calibration_detail
