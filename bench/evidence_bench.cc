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

// 2^24 values (64 MiB, far beyond the caches: a rank's share of the small preset is 16M). The
// benchmarks take the first state.range(0) · 2^20 of them.
const std::vector<float>& values() {
  static const std::vector<float> v = [] {
    const PhiloxKey key = philox_key(7, "evidence_bench");
    std::vector<float> out(size_t{1} << 24);
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = static_cast<float>(1e-3 * random_normal(key, static_cast<int64_t>(i)));
    return out;
  }();
  return v;
}

void set_rate(benchmark::State& state, size_t n) {
  state.counters["elem/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

size_t count(const benchmark::State& state) { return static_cast<size_t>(state.range(0)) << 20; }

// Args: millions (2^20) of values; 4 fits the host's last-level cache, 16 does not.
void BM_exact_sum(benchmark::State& state) {
  const float* v = values().data();
  const size_t n = count(state);
  for (auto _ : state) {
    ExactSum s;
    s.add(v, n);
    benchmark::DoNotOptimize(s.sum_squares());
  }
  set_rate(state, n);
}
BENCHMARK(BM_exact_sum)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond);

// Statistics plus both digest lanes (second arg 1), or statistics only (0).
void BM_tensor_summary(benchmark::State& state) {
  const float* v = values().data();
  const size_t n = count(state);
  for (auto _ : state) {
    evidence::TensorSummary s;
    s.add_contiguous(v, static_cast<int64_t>(n), 0, state.range(1) != 0);
    benchmark::DoNotOptimize(s.lane0);
  }
  set_rate(state, n);
}
BENCHMARK(BM_tensor_summary)->Args({4, 0})->Args({4, 1})->Args({16, 0})->Args({16, 1})->Unit(benchmark::kMillisecond);

// The same statistics and lanes in two sweeps over the tensor (the code before add_contiguous fused them
// block by block), for the paired comparison of the single pass.
void BM_tensor_summary_two_sweeps(benchmark::State& state) {
  const float* v = values().data();
  const size_t n = count(state);
  for (auto _ : state) {
    evidence::TensorSummary s;
    s.stats.add(v, n);
    evidence::mix_lanes(v, static_cast<int64_t>(n), 0, s.lane0, s.lane1);
    benchmark::DoNotOptimize(s.lane0);
  }
  set_rate(state, n);
}
BENCHMARK(BM_tensor_summary_two_sweeps)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond);

void BM_xxh3_128(benchmark::State& state) {
  const float* v = values().data();
  const size_t n = count(state);
  for (auto _ : state) benchmark::DoNotOptimize(xxh3_128(v, n * sizeof(float)));
  set_rate(state, n);
}
BENCHMARK(BM_xxh3_128)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sp

BENCHMARK_MAIN();
