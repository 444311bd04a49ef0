// Kernel benchmarks: forward + backward of each op at the `small` preset shapes (N = 4·256 tokens,
// C = 512, H = KV = 8, D = 64, F = 1376, V = 8192) and an sgemm peak probe (n = 1024 square).
// Not a test: nothing here asserts a speed. Figures and the PyTorch comparison: docs/kernels.md.
// Run single-threaded with OPENBLAS_NUM_THREADS=1 to compare with PyTorch eager at 1 thread; the linear,
// attention and sgemm benchmarks pin one thread themselves and run on each fp32 GEMM backend (the `onednn`
// argument: 0 OpenBLAS, 1 oneDNN, train.gemm32).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace sp::kernels {
namespace {

constexpr int64_t kB = 4, kT = 256, kN = kB * kT, kC = 512, kH = 8, kKV = 8, kD = 64, kF = 1376, kV = 8192;
constexpr int64_t kQkv = (kH + 2 * kKV) * kD;

std::vector<float> filled(int64_t n, double scale, const char* name) {
  const PhiloxKey key = philox_key(5, name);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(scale * random_normal(key, i));
  return v;
}

void set_flops(benchmark::State& state, double flops_per_iter) {
  state.counters["FLOP/s"] =
      benchmark::Counter(flops_per_iter * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// One thread, and the fp32 GEMM backend of argument `arg` (0 OpenBLAS, 1 oneDNN: train.gemm32) for one benchmark.
struct Gemm32Arg {
  Gemm32Arg(const benchmark::State& state, int arg) {
    set_blas_threads(1);
    set_gemm32(state.range(arg) == 1 ? Gemm32Kind::kOneDnn : Gemm32Kind::kOpenBlas);
  }
  ~Gemm32Arg() { set_gemm32(Gemm32Kind::kOpenBlas); }
};

// Linear (N, IC) → (N, OC): forward 2·N·IC·OC flops, backward twice that.
void BM_linear(benchmark::State& state) {
  const Gemm32Arg backend(state, 2);
  const int64_t IC = state.range(0), OC = state.range(1);
  auto x = filled(kN * IC, 1.0, "x"), w = filled(OC * IC, 0.04, "w"), dy = filled(kN * OC, 1.0, "dy");
  std::vector<float> y(kN * OC), dx(kN * IC), dw(OC * IC, 0.0f);
  for (auto _ : state) {
    linear_forward(y.data(), x.data(), w.data(), kN, IC, OC);
    linear_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), kN, IC, OC, false);
    benchmark::DoNotOptimize(dw.data());
  }
  set_flops(state, 6.0 * kN * IC * OC);
}
BENCHMARK(BM_linear)
    ->ArgsProduct({{kC}, {kQkv, kC, 2 * kF, kV}, {0, 1}})
    ->Args({kF, kC, 0})
    ->Args({kF, kC, 1})
    ->ArgNames({"IC", "OC", "onednn"})
    ->Unit(benchmark::kMillisecond);

void BM_embedding(benchmark::State& state) {
  std::vector<int32_t> tokens(kN);
  for (int64_t n = 0; n < kN; ++n) tokens[n] = static_cast<int32_t>((n * 7919) % kV);
  auto table = filled(kV * kC, 1.0, "table"), dout = filled(kN * kC, 1.0, "dout");
  std::vector<float> out(kN * kC), dtable(kV * kC, 0.0f);
  for (auto _ : state) {
    embedding_forward(out.data(), tokens.data(), table.data(), kN, kC, 0, kV);
    embedding_backward(dtable.data(), dout.data(), tokens.data(), kN, kC, 0, kV);
    benchmark::DoNotOptimize(dtable.data());
  }
}
BENCHMARK(BM_embedding)->Unit(benchmark::kMicrosecond);

void BM_rmsnorm(benchmark::State& state) {
  auto x = filled(kN * kC, 1.0, "x"), w = filled(kC, 1.0, "w"), dout = filled(kN * kC, 1.0, "dout");
  std::vector<float> out(kN * kC), rstd(kN), dx(kN * kC, 0.0f), dw(kC, 0.0f);
  for (auto _ : state) {
    rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), kN, kC, 1e-5f);
    rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), kN, kC);
    benchmark::DoNotOptimize(dx.data());
  }
}
BENCHMARK(BM_rmsnorm)->Unit(benchmark::kMicrosecond);

void BM_rope(benchmark::State& state) {
  std::vector<float> cos(kT * kD / 2), sin(kT * kD / 2);
  rope_tables(cos.data(), sin.data(), kT, kD, 10000.0);
  auto qkv = filled(kN * kQkv, 1.0, "qkv"), dqkv = filled(kN * kQkv, 1.0, "dqkv");
  for (auto _ : state) {
    rope_forward(qkv.data(), qkv.data(), cos.data(), sin.data(), kB, kT, kH + kKV, kD, kQkv);
    rope_backward(dqkv.data(), dqkv.data(), cos.data(), sin.data(), kB, kT, kH + kKV, kD, kQkv);
    benchmark::DoNotOptimize(dqkv.data());
  }
}
BENCHMARK(BM_rope)->Unit(benchmark::kMicrosecond);

void BM_attention(benchmark::State& state) {
  const Gemm32Arg backend(state, 0);
  auto qkv = filled(kN * kQkv, 1.0, "qkv"), dout = filled(kN * kH * kD, 1.0, "dout");
  std::vector<float> out(kN * kH * kD), probs(kB * kH * kT * kT), dqkv(kN * kQkv);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(kT)));
  for (auto _ : state) {
    attention_forward(out.data(), probs.data(), qkv.data(), kB, kT, kH, kKV, kD);
    attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), probs.data(), kB, kT, kH, kKV, kD);
    benchmark::DoNotOptimize(dqkv.data());
  }
  // Full (unmasked) products: forward 2 × 2·T²·D, backward 4 × 2·T²·D per (b, h).
  set_flops(state, 12.0 * kB * kH * kT * kT * kD);
}
BENCHMARK(BM_attention)->Arg(0)->Arg(1)->ArgName("onednn")->Unit(benchmark::kMillisecond);

void BM_swiglu(benchmark::State& state) {
  auto gu = filled(kN * 2 * kF, 1.0, "gu"), dout = filled(kN * kF, 1.0, "dout");
  std::vector<float> out(kN * kF), dgu(kN * 2 * kF);
  for (auto _ : state) {
    swiglu_forward(out.data(), gu.data(), kN, kF);
    swiglu_backward(dgu.data(), dout.data(), gu.data(), kN, kF);
    benchmark::DoNotOptimize(dgu.data());
  }
}
BENCHMARK(BM_swiglu)->Unit(benchmark::kMicrosecond);

void BM_cross_entropy(benchmark::State& state) {
  auto logits = filled(kN * kV, 2.0, "logits");
  std::vector<int32_t> targets(kN);
  for (int64_t n = 0; n < kN; ++n) targets[n] = static_cast<int32_t>((n * 104729) % kV);
  std::vector<float> losses(kN), rowmax(kN), sumexp(kN), dlogits(kN * kV);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        cross_entropy_forward(losses.data(), rowmax.data(), sumexp.data(), logits.data(), targets.data(), kN, kV));
    cross_entropy_backward(dlogits.data(), logits.data(), rowmax.data(), sumexp.data(), targets.data(), kN, kV, 0,
                           1.0f / kN);
    benchmark::DoNotOptimize(dlogits.data());
  }
}
BENCHMARK(BM_cross_entropy)->Unit(benchmark::kMillisecond);

// One block's parameters (qkv, o, gate/up, down ≈ 3.2 M) per iteration.
void BM_adamw(benchmark::State& state) {
  const int64_t n = kC * kQkv + kC * kC + kC * 2 * kF + kF * kC;
  auto p = filled(n, 0.02, "p"), g = filled(n, 0.01, "g");
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  int64_t t = 0;
  for (auto _ : state) {
    adamw_update(p.data(), m.data(), v.data(), f32_view(g.data(), n), 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, ++t, 1.0f);
    benchmark::DoNotOptimize(p.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_adamw)->Unit(benchmark::kMillisecond);

// Peak probe: C (n, n) = A · B, 2n³ flops.
void BM_sgemm_peak(benchmark::State& state) {
  const Gemm32Arg backend(state, 1);
  const int64_t n = state.range(0);
  auto a = filled(n * n, 1.0, "a"), b = filled(n * n, 1.0, "b");
  std::vector<float> c(n * n);
  for (auto _ : state) {
    gemm(c.data(), a.data(), b.data(), n, n, n, false, false, n, n, n, 1.0f, 0.0f);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, 2.0 * n * n * n);
}
BENCHMARK(BM_sgemm_peak)->ArgsProduct({{1024}, {0, 1}})->ArgNames({"n", "onednn"})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sp::kernels

BENCHMARK_MAIN();
