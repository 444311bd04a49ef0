// LlamaStage in mixed precision (model/llama_stage16.cc) with trivial degree-1 hooks, bf16 and fp16, on
// every 16-bit GEMM backend this CPU offers:
//  - loss and gradients close to the fp32 stage on the same (16-bit representable) weights, within a
//    bound derived from the 16-bit unit roundoff (the PyTorch oracle, tests/oracle, checks the exact casts);
//  - recomputation and a two-stage split bitwise equal to the plain single stage (the pipeline's
//    and recompute's equivalence classes carry over to 16 bits);
//  - the ledger holds the 16-bit buffers at the sizes docs/memory.md gives;
//  - fp16 with a loss scale large enough to overflow gives non-finite gradients (what the loss scaler
//    must catch), and a moderate scale gives the scaled gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "kernels/attention16.h"
#include "kernels/linear16.h"
#include "kernels/matmul.h"
#include "model/llama_stage.h"
#include "stage_fakes.h"
#include "tensor/float16.h"
#include "unity_id.h"

namespace sp::model {
namespace {
namespace SP_TEST_ID {

using Params = sp::test::HostParams;
using Grads = sp::test::HostGrads;
using NoTp = sp::test::SingleRankTp;

LlamaConfig cfg(bool tie) {
  LlamaConfig c;
  c.vocab_size = 61;
  c.dim = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 48;
  c.max_seq = 80;
  c.tie_embeddings = tie;
  c.init_std = 0.1f;
  return c;
}

struct Fixture {
  LlamaConfig c;
  StageSpec spec;
  Params p;
  std::vector<int32_t> tokens;
  Fixture(bool tie, DType t, kernels::Gemm16* g, Recompute rc = Recompute::kNone) : c(cfg(tie)) {
    spec.layer_begin = 0;
    spec.layer_end = 2;
    spec.micro_batch_size = 2;
    spec.seq_len = 70;  // crosses the attention kernels' 64-row blocks
    spec.recompute = rc;
    spec.precision = t;
    spec.gemm16 = g;
    p.dtype = t;
    const DType w16 = t == DType::kF32 ? DType::kBF16 : t;
    for (int id = 0; id < unit_count(c); ++id) {
      const UnitLayout u = unit_layout(c, id, 0, 1);
      std::vector<float> w(static_cast<size_t>(u.numel));
      init_unit(w.data(), u, 7, c.init_std);
      for (const TensorSlot& s : u.tensors)
        if (s.spec.tp_dim < 0)
          for (int64_t k = 0; k < s.numel; ++k) w[static_cast<size_t>(s.offset + k)] += 0.05f * (k % 5);
      p.units16[id].resize(w.size());
      float16_from_f32(p.units16[id].data(), w.data(), u.numel, w16);
      f32_from_float16(w.data(), p.units16[id].data(), u.numel, w16);
      p.units[id] = std::move(w);
    }
    std::mt19937 rng(3);
    for (int i = 0; i < 2 * 71; ++i) tokens.push_back(static_cast<int32_t>(rng() % 61));
  }
  // Mean loss over the N = 140 targets and its gradients, scaled by `scale`.
  double run(Grads& g, float scale = 1.0f) {
    MemoryLedger ledger;
    LlamaStage stage(c, spec, ledger);
    auto slot = stage.make_slot(0);
    stage.load_tokens(*slot, tokens.data());
    NoTp tp;
    const double loss = stage.forward(*slot, p, tp) / 140.0;
    for (int id = 0; id < unit_count(c); ++id) g.units[id].assign(p.units[id].size(), 0.0f);
    stage.backward(*slot, p, g, tp, scale / 140.0f);
    return loss;
  }
};

struct Backend {
  DType t;
  std::unique_ptr<kernels::Gemm16> gemm;
};
std::vector<Backend> backends() {
  kernels::set_blas_threads(1);
  std::vector<Backend> out;
  for (DType t : {DType::kBF16, DType::kF16}) {
    out.push_back({t, std::move(kernels::make_gemm16(kernels::Gemm16Kind::kFallback, t)).value()});
    const bool native =
        t == DType::kBF16 ? kernels::gemm16_capability().onednn_bf16 : kernels::gemm16_capability().onednn_f16;
    if (native) out.push_back({t, std::move(kernels::make_gemm16(kernels::Gemm16Kind::kOneDnn, t)).value()});
  }
  return out;
}

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

TEST(LlamaStage16, CloseToFp32OnTheSameWeights) {
  for (bool tie : {false, true})
    for (Backend& be : backends()) {
      Fixture f16(tie, be.t, be.gemm.get());
      Fixture f32(tie, DType::kF32, nullptr);
      f32.p = f16.p;  // the same weights, fp32 path
      f32.p.dtype = DType::kF32;
      Grads g16, g32;
      const double l16 = f16.run(g16), l32 = f32.run(g32);
      // Each rounding point perturbs a value by a relative error uniform in ±u (u = 2^-8 bf16, 2^-11 fp16),
      // RMS u/√3, independently; a gradient's path crosses R = 13 rounding points per layer + 4 in the head
      // (docs/equivalence.md §5), which add in quadrature: relative L2 ≈ √R·u/√3 (bf16: 1.2e-2 at R = 30;
      // measured 3.7e-3 … 7.5e-3).
      // Bound: twice that. A wrong index, a missing term or a wrong cast dtype gives far more.
      const double u = be.t == DType::kBF16 ? 0x1p-8 : 0x1p-11;
      const double bound = 2.0 * std::sqrt(13.0 * static_cast<double>(f16.c.n_layers) + 4.0) * u / std::sqrt(3.0);
      EXPECT_NEAR(l16, l32, bound * std::abs(l32)) << be.gemm->name();
      std::printf("%s %s tie %d: loss %.7f, fp32 %.7f, relative difference %.3g\n", be.gemm->name().c_str(),
                  dtype_name(be.t).data(), tie, l16, l32, std::abs(l16 - l32) / std::abs(l32));
      for (int id = 0; id < unit_count(f16.c); ++id) {
        const double r = rel_l2(g16.units[id], g32.units[id]);
        EXPECT_LT(r, bound) << be.gemm->name() << " unit " << id << " tie " << tie;
        std::printf("%s %s tie %d unit %d: relative L2 gradient difference to fp32 %.3g\n", be.gemm->name().c_str(),
                    dtype_name(be.t).data(), tie, id, r);
      }
    }
}

TEST(LlamaStage16, RecomputeAndTwoStagesAreBitwiseEqual) {
  for (Backend& be : backends()) {
    Fixture a(false, be.t, be.gemm.get());
    Grads ga;
    const double la = a.run(ga);
    for (Recompute rc : {Recompute::kSelective, Recompute::kFull}) {
      Fixture b(false, be.t, be.gemm.get(), rc);
      Grads gb;
      EXPECT_EQ(la, b.run(gb));
      for (int id = 0; id < unit_count(a.c); ++id)
        EXPECT_EQ(ga.units[id], gb.units[id]) << be.gemm->name() << " " << recompute_name(rc) << " unit " << id;
    }
    // Two stages, activations handed over by copy (the pipeline's fp32 p2p buffers).
    MemoryLedger ledger;
    StageSpec s0 = a.spec, s1 = a.spec;
    s0.layer_end = 1;
    s0.last = false;
    s1.layer_begin = 1;
    s1.first = false;
    LlamaStage st0(a.c, s0, ledger), st1(a.c, s1, ledger);
    auto a0 = st0.make_slot(0);
    auto a1 = st1.make_slot(1);
    st0.load_tokens(*a0, a.tokens.data());
    st1.load_tokens(*a1, a.tokens.data());
    NoTp tp;
    Grads g;
    for (int id = 0; id < unit_count(a.c); ++id) g.units[id].assign(a.p.units[id].size(), 0.0f);
    st0.forward(*a0, a.p, tp);
    std::copy_n(a0->output(), st0.tokens() * a.c.dim, a1->input());
    EXPECT_EQ(st1.forward(*a1, a.p, tp) / 140.0, la);
    st1.backward(*a1, a.p, g, tp, 1.0f / 140.0f);
    std::copy_n(st1.grad_input(), st1.tokens() * a.c.dim, st0.grad_output());
    st0.backward(*a0, a.p, g, tp, 1.0f / 140.0f);
    for (int id = 0; id < unit_count(a.c); ++id)
      EXPECT_EQ(g.units[id], ga.units[id]) << be.gemm->name() << " unit " << id;
  }
}

TEST(LlamaStage16, LedgerHoldsSixteenBitBuffers) {
  for (Backend& be : backends()) {
    Fixture f(false, be.t, be.gemm.get());
    MemoryLedger ledger;
    LlamaStage stage(f.c, f.spec, ledger);
    auto slot = stage.make_slot(0);
    const auto& e = ledger.entries();
    const int64_t N = 140, C = 32, D = 8, Hl = 4, KVl = 2, Fl = 48, V = 61, T = 70, Wqkv = (Hl + 2 * KVl) * D;
    auto bytes = [&](const std::string& name) { return e.at(name).live; };
    // Stored activations: 2 bytes for the GEMM inputs and probabilities, 4 for the residual stream and rstd.
    EXPECT_EQ(bytes("act.s0.layers.0.xn1"), N * C * 2);
    EXPECT_EQ(bytes("act.s0.layers.0.qkv"), N * Wqkv * 2);
    EXPECT_EQ(bytes("act.s0.layers.0.probs"), 2 * Hl * T * T * 2);
    EXPECT_EQ(bytes("act.s0.layers.1.attn"), N * Hl * D * 2);
    EXPECT_EQ(bytes("act.s0.layers.1.gu"), N * 2 * Fl * 2);
    EXPECT_EQ(bytes("act.s0.layers.1.h"), N * Fl * 2);
    EXPECT_EQ(bytes("act.s0.layers.1.xn2"), N * C * 2);
    EXPECT_EQ(bytes("act.s0.layers.1.mid"), N * C * 4);
    EXPECT_EQ(bytes("act.s0.layers.1.rstd2"), N * 4);
    EXPECT_EQ(bytes("act.s0.res0"), N * C * 4);
    EXPECT_EQ(bytes("act.s0.xf"), N * C * 2);
    EXPECT_EQ(bytes("act.s0.logits"), N * V * 2);  // 16-bit, dlogits rounded in place
    // Mixed-precision workspace. grad16 also stages the head's fp32 product, r rows at a time: as many as its
    // bytes hold, at least N·V elements (here N·2Fl elements of 2 bytes: 110 rows of V floats).
    EXPECT_EQ(bytes("scratch.norm_weight"), C * 4);
    const int64_t g16 = std::max({N * C, N * 2 * Fl, N * Hl * D, N * Wqkv, N * V});
    const int64_t rows = std::clamp<int64_t>(g16 * 2 / (V * 4), 1, N);
    EXPECT_EQ(rows, 110);
    EXPECT_EQ(bytes("scratch.grad16"), std::max(g16, 2 * V * rows) * 2);
    EXPECT_EQ(bytes("scratch.attention"), kernels::attention16_scratch_floats(T, D) * 4);
    EXPECT_EQ(kernels::attention16_scratch_floats(T, D),
              T * T + std::max(T, std::min<int64_t>(T, 64) * D) + (T * T + 1) / 2);
    const bool fallback = be.gemm->name().rfind("fallback", 0) == 0;
    if (fallback) {
      // The fallback widens both operands of the largest product: the lm_head's dw = dlogitsᵀ·xf, (V, C, N).
      const int64_t ws = std::max({N * C + C * V, N * V + V * C, V * N + N * C, N * C + C * Wqkv, N * Wqkv + Wqkv * C,
                                   Wqkv * N + N * C, N * 2 * Fl + 2 * Fl * C, 2 * Fl * N + N * C, N * Fl + Fl * C,
                                   C * N + N * Fl, 64 * T + T * D});
      EXPECT_EQ(bytes("scratch.gemm16"), ws * 4);
    } else {
      EXPECT_EQ(e.count("scratch.gemm16"), 0u) << "oneDNN needs no workspace of ours";
    }
  }
}

TEST(LlamaStage16, Fp16LossScaleOverflowIsVisible) {
  auto g = std::move(kernels::make_gemm16(kernels::Gemm16Kind::kAuto, DType::kF16)).value();
  Fixture f(false, DType::kF16, g.get());
  Grads plain, scaled, overflow;
  f.run(plain);
  f.run(scaled, 1024.0f);
  // A power-of-two scale is exact through every fp16 rounding unless a value leaves fp16's normal range,
  // so the scaled gradient divided by the scale is within fp16 rounding of the plain one.
  for (int id = 0; id < unit_count(f.c); ++id) {
    std::vector<float> unscaled = scaled.units[id];
    for (float& x : unscaled) x /= 1024.0f;
    EXPECT_LT(rel_l2(unscaled, plain.units[id]), 0x1p-6) << "unit " << id;
  }
  f.run(overflow, 65536.0f * 65536.0f);  // 2^32: the rounded gradients leave fp16's range
  bool nonfinite = false;
  for (auto& [id, v] : overflow.units)
    for (float x : v) nonfinite |= !std::isfinite(x);
  EXPECT_TRUE(nonfinite) << "an fp16 overflow must reach the gradient leaves as inf/NaN";
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::model
