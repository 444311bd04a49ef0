// The whole model (model/llama_stage.h) with trivial degree-1 hooks: gradients against central finite
// differences in double-checked sampling, recomputation bitwise equal to saved activations, and a
// two-stage split bitwise equal to one stage. Independent of PyTorch (tests/oracle covers that too).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "kernels/attention.h"
#include "model/llama_stage.h"
#include "stage_fakes.h"
#include "unity_id.h"

namespace sp::model {
namespace {
namespace SP_TEST_ID {

using Params = sp::test::HostParams;
using Grads = sp::test::HostGrads;
using NoTp = sp::test::SingleRankTp;

LlamaConfig cfg(bool tie) {
  LlamaConfig c;
  c.vocab_size = 23;
  c.dim = 12;
  c.n_layers = 2;
  c.n_heads = 3;
  c.n_kv_heads = 1;
  c.ffn_dim = 10;
  c.max_seq = 8;
  c.tie_embeddings = tie;
  c.init_std = 0.3f;  // large enough that finite differences see every path
  return c;
}

struct Fixture {
  LlamaConfig c;
  StageSpec spec;
  Params p;
  std::vector<int32_t> tokens;
  Fixture(bool tie, Recompute rc) : c(cfg(tie)) {
    spec.layer_begin = 0;
    spec.layer_end = 2;
    spec.micro_batch_size = 2;
    spec.seq_len = 5;
    spec.recompute = rc;
    for (int id = 0; id < unit_count(c); ++id) {
      const UnitLayout u = unit_layout(c, id, 0, 1);
      p.units[id].resize(static_cast<size_t>(u.numel));
      init_unit(p.units[id].data(), u, 7, c.init_std);
      // Perturb norm weights away from 1 so that their gradients matter.
      for (const TensorSlot& t : u.tensors)
        if (t.spec.tp_dim < 0)
          for (int64_t k = 0; k < t.numel; ++k) p.units[id][static_cast<size_t>(t.offset + k)] += 0.05f * (k % 5);
    }
    std::mt19937 rng(3);
    for (int i = 0; i < 2 * 6; ++i) tokens.push_back(static_cast<int32_t>(rng() % 23));
  }
  // Loss (mean over the N targets) and gradients.
  double run(Grads* g) {
    MemoryLedger ledger;
    LlamaStage stage(c, spec, ledger);
    auto slot = stage.make_slot(0);
    stage.load_tokens(*slot, tokens.data());
    NoTp tp;
    const double loss = stage.forward(*slot, p, tp) / 10.0;
    if (g != nullptr) {
      for (int id = 0; id < unit_count(c); ++id) g->units[id].assign(p.units[id].size(), 0.0f);
      stage.backward(*slot, p, *g, tp, 1.0f / 10.0f);
    }
    return loss;
  }
};

TEST(LlamaStage, GradientsMatchFiniteDifferences) {
  for (bool tie : {false, true}) {
    Fixture f(tie, Recompute::kNone);
    Grads g;
    f.run(&g);
    for (int id = 0; id < unit_count(f.c); ++id) EXPECT_EQ(g.done_count[id], 1) << "unit " << id;
    std::mt19937 rng(5);
    int checked = 0;
    for (int id = 0; id < unit_count(f.c); ++id) {
      auto& w = f.p.units[id];
      for (int s = 0; s < 12; ++s) {
        const size_t j = rng() % w.size();
        const float orig = w[j];
        const float h = 1e-2f * std::max(1.0f, std::abs(orig));
        w[j] = orig + h;
        const double up = f.run(nullptr);
        w[j] = orig - h;
        const double down = f.run(nullptr);
        w[j] = orig;
        const double fd = (up - down) / (2.0 * static_cast<double>(h));
        const double an = g.units[id][j];
        // Central differences in fp32 forward passes: truncation O(h²) plus rounding ~u·|L|/h ≈ 6e-6;
        // 2e-3 absolute + 2% relative leaves a wide margin and still catches any wrong term.
        EXPECT_NEAR(an, fd, 2e-3 + 0.02 * std::abs(fd)) << "unit " << id << " element " << j << " tie " << tie;
        ++checked;
      }
    }
    EXPECT_GT(checked, 40);
  }
}

TEST(LlamaStage, RecomputeIsBitwiseEqual) {
  for (Recompute rc : {Recompute::kSelective, Recompute::kFull}) {
    Fixture a(false, Recompute::kNone), b(false, rc);
    Grads ga, gb;
    EXPECT_EQ(a.run(&ga), b.run(&gb));
    for (int id = 0; id < unit_count(a.c); ++id)
      EXPECT_EQ(ga.units[id], gb.units[id]) << recompute_name(rc) << " unit " << id;
  }
}

TEST(LlamaStage, SelectiveRecomputeRebuildsTheForwardsProbabilities) {
  // attention_probs_forward writes attention_forward's probabilities bit for bit (T = 130: three row blocks).
  const int64_t B = 1, T = 130, H = 4, KV = 2, D = 8, W = (H + 2 * KV) * D;
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> qkv(static_cast<size_t>(B * T * W)), out(static_cast<size_t>(B * T * H * D));
  for (float& x : qkv) x = n(rng);
  std::vector<float> p1(static_cast<size_t>(B * H * T * T)), p2(p1.size(), -1.0f);
  kernels::attention_forward(out.data(), p1.data(), qkv.data(), B, T, H, KV, D);
  kernels::attention_probs_forward(p2.data(), qkv.data(), B, T, H, KV, D);
  EXPECT_EQ(p1, p2);
  // The slot keeps no probabilities; the stage holds one shared (B, Hl, T, T) buffer.
  Fixture f(false, Recompute::kSelective);
  MemoryLedger ledger;
  LlamaStage stage(f.c, f.spec, ledger);
  auto slot = stage.make_slot(0);
  EXPECT_FALSE(slot->blocks[0].probs.defined());
  EXPECT_TRUE(ledger.entries().count("recompute.probs"));
  EXPECT_FALSE(ledger.entries().count("act.s0.layers.0.probs"));
}

TEST(LlamaStage, TwoStagesEqualOne) {
  Fixture f(false, Recompute::kNone);
  Grads whole;
  const double loss = f.run(&whole);
  // Stage 0: embed + layer 0; stage 1: layer 1 + head; activations handed over by copy.
  MemoryLedger ledger;
  StageSpec s0 = f.spec, s1 = f.spec;
  s0.layer_end = 1;
  s0.last = false;
  s1.layer_begin = 1;
  s1.first = false;
  LlamaStage st0(f.c, s0, ledger), st1(f.c, s1, ledger);
  auto a0 = st0.make_slot(0);
  auto a1 = st1.make_slot(1);
  st0.load_tokens(*a0, f.tokens.data());
  st1.load_tokens(*a1, f.tokens.data());
  NoTp tp;
  Grads g;
  for (int id = 0; id < unit_count(f.c); ++id) g.units[id].assign(f.p.units[id].size(), 0.0f);
  st0.forward(*a0, f.p, tp);
  std::copy_n(a0->output(), st0.tokens() * f.c.dim, a1->input());
  const double l1 = st1.forward(*a1, f.p, tp) / 10.0;
  st1.backward(*a1, f.p, g, tp, 0.1f);
  std::copy_n(st1.grad_input(), st1.tokens() * f.c.dim, st0.grad_output());
  st0.backward(*a0, f.p, g, tp, 0.1f);
  EXPECT_EQ(l1, loss);
  for (int id = 0; id < unit_count(f.c); ++id) EXPECT_EQ(g.units[id], whole.units[id]) << "unit " << id;
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::model
