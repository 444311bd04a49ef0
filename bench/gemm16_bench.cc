// 16-bit GEMM benchmarks at the `small` preset's shapes (one micro-batch: N = 1·256 tokens, C = 512,
// H = KV = 8, D = 64, F = 1376, V = 8192): each linear's forward + backward (three products) in fp32
// (OpenBLAS sgemm) and through every 16-bit backend (oneDNN bf16 where the CPU has AVX512-BF16, the
// fallback in bf16 and fp16), the fallback's widening alone, attention forward + backward, and one whole
// model stage (the small preset's 8 layers, embedding and head) forward + backward per precision: what
// phase 2's engine step will spend in the model.
// Not a test: nothing here asserts a speed. Figures, CPU flags and the command: docs/performance.md.
// Run single-threaded: OPENBLAS_NUM_THREADS=1 (the kernels pin oneDNN to OpenBLAS's thread count).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/rng.h"
#include "kernels/attention.h"
#include "kernels/attention16.h"
#include "kernels/gemm16.h"
#include "kernels/linear16.h"
#include "kernels/matmul.h"
#include "model/llama_stage.h"
#include "stage_fakes.h"
#include "tensor/float16.h"

namespace sp::kernels {
namespace {

constexpr int64_t kT = 256, kN = 1 * kT, kC = 512, kH = 8, kKV = 8, kD = 64, kF = 1376, kV = 8192;
constexpr int64_t kQkv = (kH + 2 * kKV) * kD;

std::vector<float> filled(int64_t n, double scale, const char* name) {
  const PhiloxKey key = philox_key(6, name);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(scale * random_normal(key, i));
  return v;
}
std::vector<uint16_t> narrowed(const std::vector<float>& f, DType t) {
  std::vector<uint16_t> h(f.size());
  float16_from_f32(h.data(), f.data(), static_cast<int64_t>(f.size()), t);
  return h;
}

void set_flops(benchmark::State& state, double flops_per_iter) {
  state.counters["FLOP/s"] =
      benchmark::Counter(flops_per_iter * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// Backend of a benchmark row: 0 = fp32 sgemm, 1 = bf16 oneDNN, 2 = bf16 fallback, 3 = fp16 fallback.
struct Variant {
  const char* label;
  DType dtype;
  Gemm16Kind kind;
};
constexpr Variant kVariants[] = {{"fp32 sgemm", DType::kF32, Gemm16Kind::kAuto},
                                 {"bf16 onednn", DType::kBF16, Gemm16Kind::kOneDnn},
                                 {"bf16 fallback", DType::kBF16, Gemm16Kind::kFallback},
                                 {"fp16 fallback", DType::kF16, Gemm16Kind::kFallback}};

// The 16-bit backend of variant v, or nullptr after marking the row skipped.
std::unique_ptr<Gemm16> backend(benchmark::State& state, const Variant& v) {
  auto g = make_gemm16(v.kind, v.dtype);
  if (!g.ok()) {
    state.SkipWithError(g.status().message().c_str());
    return nullptr;
  }
  state.SetLabel(std::string(v.label) + " [" + (*g)->name() + "]");
  return std::move(g).value();
}

// Linear (N, IC) → (N, OC), forward + backward: 6·N·IC·OC flops.
void BM_linear(benchmark::State& state) {
  set_blas_threads(1);
  const int64_t IC = state.range(0), OC = state.range(1);
  const Variant& v = kVariants[state.range(2)];
  auto x = filled(kN * IC, 1.0, "x"), w = filled(OC * IC, 0.04, "w"), dy = filled(kN * OC, 1.0, "dy");
  std::vector<float> y(kN * OC), dx(kN * IC), dw(OC * IC, 0.0f);
  if (v.dtype == DType::kF32) {
    state.SetLabel(v.label);
    for (auto _ : state) {
      linear_forward(y.data(), x.data(), w.data(), kN, IC, OC);
      linear_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), kN, IC, OC, false);
      benchmark::DoNotOptimize(dw.data());
    }
  } else {
    auto g = backend(state, v);
    if (!g) return;
    auto x16 = narrowed(x, v.dtype), w16 = narrowed(w, v.dtype), dy16 = narrowed(dy, v.dtype);
    std::vector<float> ws(static_cast<size_t>(linear16_workspace_floats(*g, kN, IC, OC)) + 1);
    for (auto _ : state) {
      linear16_forward(y.data(), x16.data(), w16.data(), kN, IC, OC, *g, ws.data());
      linear16_backward(dx.data(), dw.data(), dy16.data(), x16.data(), w16.data(), kN, IC, OC, false, *g, ws.data());
      benchmark::DoNotOptimize(dw.data());
    }
  }
  set_flops(state, 6.0 * kN * IC * OC);
}
#define SP_LINEAR_ROWS(IC, OC) ->Args({IC, OC, 0})->Args({IC, OC, 1})->Args({IC, OC, 2})->Args({IC, OC, 3})
BENCHMARK(BM_linear)
SP_LINEAR_ROWS(kC, kQkv)
SP_LINEAR_ROWS(kC, kC)
SP_LINEAR_ROWS(kC, 2 * kF)
SP_LINEAR_ROWS(kF, kC) SP_LINEAR_ROWS(kC, kV)->ArgNames({"IC", "OC", "variant"})->Unit(benchmark::kMillisecond);

// What the fallback adds to sgemm for one linear's three products: widening both operands of each.
void BM_fallback_widening(benchmark::State& state) {
  const int64_t IC = state.range(0), OC = state.range(1);
  auto x16 = narrowed(filled(kN * IC, 1.0, "x"), DType::kBF16),
       w16 = narrowed(filled(OC * IC, 0.04, "w"), DType::kBF16);
  auto dy16 = narrowed(filled(kN * OC, 1.0, "dy"), DType::kBF16);
  std::vector<float> a(static_cast<size_t>(std::max({kN * IC, OC * IC, kN * OC})));
  for (auto _ : state) {  // forward (x, w), dx (dy, w), dw (dy, x)
    f32_from_float16(a.data(), x16.data(), kN * IC, DType::kBF16);
    f32_from_float16(a.data(), w16.data(), OC * IC, DType::kBF16);
    f32_from_float16(a.data(), dy16.data(), kN * OC, DType::kBF16);
    f32_from_float16(a.data(), w16.data(), OC * IC, DType::kBF16);
    f32_from_float16(a.data(), dy16.data(), kN * OC, DType::kBF16);
    f32_from_float16(a.data(), x16.data(), kN * IC, DType::kBF16);
    benchmark::DoNotOptimize(a.data());
  }
}
BENCHMARK(BM_fallback_widening)
    ->Args({kC, kQkv})
    ->Args({kC, kC})
    ->Args({kC, 2 * kF})
    ->Args({kF, kC})
    ->Args({kC, kV})
    ->ArgNames({"IC", "OC"})
    ->Unit(benchmark::kMillisecond);

// Attention forward + backward at B = 1, H = KV = 8, T = 256, D = 64.
void BM_attention(benchmark::State& state) {
  set_blas_threads(1);
  const Variant& v = kVariants[state.range(0)];
  const int64_t ld = (kH + 2 * kKV) * kD;
  auto qkv = filled(kN * ld, 1.0, "qkv"), dout = filled(kN * kH * kD, 0.1, "dout");
  std::vector<float> out(kN * kH * kD), probs(kH * kT * kT), dqkv(kN * ld);
  if (v.dtype == DType::kF32) {
    state.SetLabel(v.label);
    std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(kT)));
    for (auto _ : state) {
      attention_forward(out.data(), probs.data(), qkv.data(), 1, kT, kH, kKV, kD);
      attention_backward(dqkv.data(), scratch.data(), dout.data(), qkv.data(), probs.data(), 1, kT, kH, kKV, kD);
      benchmark::DoNotOptimize(dqkv.data());
    }
  } else {
    auto g = backend(state, v);
    if (!g) return;
    auto qkv16 = narrowed(qkv, v.dtype), dout16 = narrowed(dout, v.dtype);
    std::vector<uint16_t> out16(out.size()), probs16(probs.size());
    std::vector<float> scratch(static_cast<size_t>(attention16_scratch_floats(kT, kD)));
    std::vector<float> ws(static_cast<size_t>(attention16_workspace_floats(*g, kT, kD)) + 1);
    for (auto _ : state) {
      attention16_forward(out16.data(), probs16.data(), qkv16.data(), 1, kT, kH, kKV, kD, *g, scratch.data(),
                          ws.data());
      attention16_backward(dqkv.data(), dout16.data(), qkv16.data(), probs16.data(), 1, kT, kH, kKV, kD, *g,
                           scratch.data(), ws.data());
      benchmark::DoNotOptimize(dqkv.data());
    }
  }
}
BENCHMARK(BM_attention)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->ArgName("variant")->Unit(benchmark::kMillisecond);

// One LlamaStage (small: V 8192, C 512, L 8, H = KV 8, F 1376, T 256, B 1) forward + backward.
// The stage's hooks for one rank (tests/support/stage_fakes.h, shared with the stage's tests).
using StageParams = sp::test::HostParams;
using StageGrads = sp::test::HostGrads;
using NoTp = sp::test::SingleRankTp;

void BM_stage(benchmark::State& state) {
  set_blas_threads(1);
  const Variant& v = kVariants[state.range(0)];
  model::LlamaConfig c;
  c.vocab_size = kV;
  c.dim = kC;
  c.n_layers = 8;
  c.n_heads = kH;
  c.n_kv_heads = kKV;
  c.ffn_dim = kF;
  c.max_seq = kT;
  model::StageSpec spec;
  spec.layer_end = 8;
  spec.micro_batch_size = 1;
  spec.seq_len = kT;
  std::unique_ptr<Gemm16> g;
  if (v.dtype != DType::kF32) {
    g = backend(state, v);
    if (!g) return;
    spec.precision = v.dtype;
    spec.gemm16 = g.get();
  } else {
    state.SetLabel(v.label);
  }
  StageParams p;
  p.dtype = v.dtype;
  StageGrads grads;
  for (int id = 0; id < model::unit_count(c); ++id) {
    const model::UnitLayout u = model::unit_layout(c, id, 0, 1);
    std::vector<float>& w = p.units[id];
    w.resize(static_cast<size_t>(u.numel));
    model::init_unit(w.data(), u, 1234, 0.02f);
    p.units16[id].resize(w.size());
    if (v.dtype != DType::kF32) float16_from_f32(p.units16[id].data(), w.data(), u.numel, v.dtype);
    grads.units[id].assign(w.size(), 0.0f);
  }
  std::vector<int32_t> tokens(kT + 1);
  for (int64_t i = 0; i <= kT; ++i) tokens[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % kV);
  MemoryLedger ledger;
  model::LlamaStage stage(c, spec, ledger);
  auto slot = stage.make_slot(0);
  stage.load_tokens(*slot, tokens.data());
  NoTp tp;
  for (auto _ : state) {
    benchmark::DoNotOptimize(stage.forward(*slot, p, tp));
    stage.backward(*slot, p, grads, tp, 1.0f / kT);
  }
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(kT * state.iterations()), benchmark::Counter::kIsRate);
  state.counters["peak MiB"] = static_cast<double>(ledger.total().peak) / (1 << 20);
}
BENCHMARK(BM_stage)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->ArgName("variant")->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace
}  // namespace sp::kernels

BENCHMARK_MAIN();
