// Evidence cost per element (issue 4: tracing + checksums ≤ 3 % of a step): the exact statistics
// (ExactSum: Σx, Σx², absmax, exact) and the shard-invariant digest lanes of TensorSummary, over
// gradient-like values, and XXH3-128 (trace payload and replica digests) for scale. Not a test.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/exact_sum.h"
#include "core/hash.h"
#include "core/rng.h"
#include "evidence/tensor_summary.h"

namespace sp {
namespace {

const std::vector<float>& values() {
  static const std::vector<float> v = [] {
    const PhiloxKey key = philox_key(7, "evidence_bench");
    std::vector<float> out(size_t{1} << 22);
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(1e-3 * random_normal(key, static_cast<int64_t>(i)));
    return out;
  }();
  return v;
}

void set_rate(benchmark::State& state, size_t n) {
  state.counters["elem/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_exact_sum(benchmark::State& state) {
  const auto& v = values();
  for (auto _ : state) {
    ExactSum s;
    s.add(v.data(), v.size());
    benchmark::DoNotOptimize(s.sum_squares());
  }
  set_rate(state, v.size());
}
BENCHMARK(BM_exact_sum)->Unit(benchmark::kMillisecond);

// Statistics plus both digest lanes (arg 1), or statistics only (arg 0).
void BM_tensor_summary(benchmark::State& state) {
  const auto& v = values();
  for (auto _ : state) {
    evidence::TensorSummary s;
    s.add_contiguous(v.data(), static_cast<int64_t>(v.size()), 0, state.range(0) != 0);
    benchmark::DoNotOptimize(s.lane0);
  }
  set_rate(state, v.size());
}
BENCHMARK(BM_tensor_summary)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_xxh3_128(benchmark::State& state) {
  const auto& v = values();
  for (auto _ : state) benchmark::DoNotOptimize(xxh3_128(v.data(), v.size() * sizeof(float)));
  set_rate(state, v.size());
}
BENCHMARK(BM_xxh3_128)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sp

BENCHMARK_MAIN();
