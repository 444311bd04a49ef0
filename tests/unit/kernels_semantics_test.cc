// Kernel contracts that the gradient table does not cover: accumulation semantics ("+=" really
// accumulates, "=" overwrites even NaN), aliasing (rope in place, cross-entropy dlogits = logits),
// grouped-query attention against explicitly repeated KV heads, vocab-parallel splits against the
// tp = 1 path, closed forms (uniform logits, RoPE tables, rotation round trip), and the gemm wrapper
// against its naive twin for every transpose and stride.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/reference/matmul.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "unity_id.h"

namespace sp::kernels {
namespace {
namespace SP_TEST_ID {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> normal(const char* name, int64_t n, double scale = 1.0) {
  const PhiloxKey key = philox_key(99, name);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(scale * random_normal(key, i));
  return v;
}

std::vector<float> add(const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<float> c(a.size());
  for (size_t i = 0; i < a.size(); ++i) c[i] = a[i] + b[i];
  return c;
}

void expect_near_all(const std::vector<float>& a, const std::vector<float>& b, double rel, double abs,
                     const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::fabs(static_cast<double>(a[i]) - b[i]) <= abs + rel * std::fabs(static_cast<double>(b[i]))) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: " << a[i] << " vs " << b[i];
  }
}

// ---- accumulation semantics -------------------------------------------------------------------

TEST(KernelsSemantics, LinearBackwardAccumulatesDwAndChoosesDx) {
  const int64_t N = 6, IC = 5, OC = 4;
  const auto x = normal("x", N * IC), w = normal("w", OC * IC), dy = normal("dy", N * OC);
  const auto dx0 = normal("dx0", N * IC), dw0 = normal("dw0", OC * IC);
  std::vector<float> dx_fresh(N * IC, kNaN), dw_fresh(OC * IC, 0.0f);
  linear_backward(dx_fresh.data(), dw_fresh.data(), dy.data(), x.data(), w.data(), N, IC, OC, false);
  for (float v : dx_fresh) ASSERT_FALSE(std::isnan(v)) << "dx '=' must overwrite a NaN-filled buffer";
  std::vector<float> dx = dx0, dw = dw0;
  linear_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), N, IC, OC, true);
  expect_near_all(dx, add(dx0, dx_fresh), 1e-6, 1e-6, "dx (+=)");
  expect_near_all(dw, add(dw0, dw_fresh), 1e-6, 1e-6, "dw (+=)");
  // Either output may be skipped.
  std::vector<float> dw_only = dw0;
  linear_backward(nullptr, dw_only.data(), dy.data(), x.data(), w.data(), N, IC, OC, false);
  EXPECT_EQ(dw_only, dw);
  std::vector<float> dx_only(N * IC, kNaN);
  linear_backward(dx_only.data(), nullptr, dy.data(), x.data(), w.data(), N, IC, OC, false);
  EXPECT_EQ(dx_only, dx_fresh);
}

TEST(KernelsSemantics, RmsnormBackwardAccumulatesBoth) {
  const int64_t N = 4, C = 19;
  const auto x = normal("x", N * C), w = normal("w", C), dout = normal("dout", N * C);
  std::vector<float> out(N * C), rstd(N);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-6f);
  std::vector<float> dx_fresh(N * C, 0.0f), dw_fresh(C, 0.0f);
  rmsnorm_backward(dx_fresh.data(), dw_fresh.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
  const auto dx0 = normal("dx0", N * C), dw0 = normal("dw0", C);
  std::vector<float> dx = dx0, dw = dw0;
  rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
  expect_near_all(dx, add(dx0, dx_fresh), 1e-6, 1e-6, "dx (residual stream +=)");
  expect_near_all(dw, add(dw0, dw_fresh), 1e-6, 1e-6, "dw (+=)");
}

TEST(KernelsSemantics, RmsnormApplyEqualsTheForwardsOutputBitForBit) {
  // ZB-H1's last stage recomputes the final norm's output from x and the saved rstd (docs/memory.md §"ZB-H1"):
  // the recomputation must be the forward's bits, or the LM head's weight gradient would differ from 1F1B's.
  // C = 77 leaves a vector tail; the scale spans small and large rows.
  const int64_t N = 37, C = 77;
  auto x = normal("x", N * C, 3.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) x[static_cast<size_t>(n * C + c)] *= std::ldexp(1.0f, static_cast<int>(n % 9) - 4);
  const auto w = normal("w", C, 0.5);
  std::vector<float> out(N * C), rstd(N), again(N * C, kNaN);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
  rmsnorm_apply(again.data(), rstd.data(), x.data(), w.data(), N, C);
  EXPECT_EQ(std::memcmp(out.data(), again.data(), out.size() * sizeof(float)), 0);
}

TEST(KernelsSemantics, RmsnormOfAConstantRowIsTheWeight) {
  // x = a·1: mean(x²) = a², out = a/sqrt(a² + eps)·w ≈ sign(a)·w.
  const int64_t C = 8;
  std::vector<float> x(C, -3.0f), w = normal("w", C), out(C), rstd(1);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), 1, C, 0.0f);
  EXPECT_FLOAT_EQ(rstd[0], 1.0f / 3.0f);
  for (int64_t c = 0; c < C; ++c) EXPECT_FLOAT_EQ(out[c], -w[c]);
}

TEST(KernelsSemantics, EmbeddingBackwardAccumulatesAndSkipsOtherShards) {
  const int64_t N = 5, C = 3, v_begin = 10, v_count = 4;
  const std::vector<int32_t> tokens = {11, 9, 11, 14, 13};  // 9 and 14 belong to other shards
  const auto dout = normal("dout", N * C);
  std::vector<float> dtable = normal("dtable0", v_count * C);
  const std::vector<float> before = dtable;
  embedding_backward(dtable.data(), dout.data(), tokens.data(), N, C, v_begin, v_count);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(dtable[0 * C + c], before[0 * C + c]);                                        // id 10: no token
    EXPECT_EQ(dtable[1 * C + c], (before[1 * C + c] + dout[0 * C + c]) + dout[2 * C + c]);  // id 11, token order
    EXPECT_EQ(dtable[2 * C + c], before[2 * C + c]);                                        // id 12: no token
    EXPECT_EQ(dtable[3 * C + c], before[3 * C + c] + dout[4 * C + c]);                      // id 13
  }
  std::vector<float> out(N * C, kNaN);
  const auto table = normal("table", v_count * C);
  embedding_forward(out.data(), tokens.data(), table.data(), N, C, v_begin, v_count);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(out[0 * C + c], table[1 * C + c]);
    EXPECT_EQ(out[1 * C + c], 0.0f);  // other shard: zero row (the TP all-reduce fills it)
    EXPECT_EQ(out[3 * C + c], 0.0f);
    EXPECT_EQ(out[4 * C + c], table[3 * C + c]);
  }
}

TEST(KernelsSemantics, VocabShardedEmbeddingSumsToTheFullLookup) {
  const int64_t N = 7, C = 4, V = 10;
  const std::vector<int32_t> tokens = {0, 9, 3, 4, 4, 7, 5};
  const auto table = normal("table", V * C);
  const auto dout = normal("dout", N * C);
  std::vector<float> full(N * C), dfull(V * C, 0.0f);
  embedding_forward(full.data(), tokens.data(), table.data(), N, C, 0, V);
  embedding_backward(dfull.data(), dout.data(), tokens.data(), N, C, 0, V);
  std::vector<float> sum(N * C, 0.0f);
  for (int64_t begin : {0, 4, 7}) {  // shards [0,4) [4,7) [7,10)
    const int64_t count = begin == 0 ? 4 : 3;
    std::vector<float> part(N * C), dpart(count * C, 0.0f);
    embedding_forward(part.data(), tokens.data(), table.data() + begin * C, N, C, begin, count);
    embedding_backward(dpart.data(), dout.data(), tokens.data(), N, C, begin, count);
    sum = add(sum, part);
    EXPECT_EQ(0, std::memcmp(dpart.data(), dfull.data() + begin * C, dpart.size() * sizeof(float))) << begin;
  }
  EXPECT_EQ(sum, full);  // exactly one shard contributes each row; the others add +0
}

TEST(KernelsSemantics, ActivationGradientsOverwriteNaN) {
  const int64_t N = 3, F = 5;
  const auto gu = normal("gu", N * 2 * F), dout = normal("dout", N * F);
  std::vector<float> dgu(N * 2 * F, kNaN);
  swiglu_backward(dgu.data(), dout.data(), gu.data(), N, F);
  for (float v : dgu) EXPECT_FALSE(std::isnan(v));

  const int64_t B = 2, T = 70, H = 4, KV = 2, D = 8, ld = (H + 2 * KV) * D;
  const auto qkv = normal("qkv", B * T * ld), da = normal("da", B * T * H * D);
  std::vector<float> out(B * T * H * D), probs(B * H * T * T, kNaN), dqkv(B * T * ld, kNaN);
  std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(T)), kNaN);
  attention_forward(out.data(), probs.data(), qkv.data(), B, T, H, KV, D);
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) {
        const float p = probs[(bh * T + i) * T + j];
        if (j > i) {
          ASSERT_EQ(p, 0.0f) << "probs above the diagonal must be exact zeros";
        } else {
          ASSERT_TRUE(p >= 0.0f && p <= 1.0f);
        }
      }
  attention_backward(dqkv.data(), scratch.data(), da.data(), qkv.data(), probs.data(), B, T, H, KV, D);
  for (float v : dqkv) ASSERT_FALSE(std::isnan(v)) << "attention_backward must write every element of dqkv";

  const int64_t V = 9;
  const auto logits = normal("logits", N * V);
  const std::vector<int32_t> targets = {2, -1, 8};
  std::vector<float> rowmax(N), sumexp(N), losses(N), dlogits(N * V, kNaN);
  cross_entropy_forward(losses.data(), rowmax.data(), sumexp.data(), logits.data(), targets.data(), N, V);
  cross_entropy_backward(dlogits.data(), logits.data(), rowmax.data(), sumexp.data(), targets.data(), N, V, 0, 1.0f);
  for (float v : dlogits) EXPECT_FALSE(std::isnan(v));
  EXPECT_EQ(losses[1], 0.0f);                                           // ignored target
  for (int64_t v = 0; v < V; ++v) EXPECT_EQ(dlogits[1 * V + v], 0.0f);  // zero gradient row
}

// ---- attention: GQA is MHA with repeated KV heads ----------------------------------------------

TEST(KernelsSemantics, GroupedQueryAttentionEqualsRepeatedKvHeads) {
  // HF repeat_kv: q head h uses kv head h / (H/KV). Building the MHA input with each kv head
  // repeated H/KV times must give the same output and dq, and dk/dv equal to the sum over the
  // repeats (the group reduction the GQA kernel does internally).
  const int64_t B = 2, T = 67, H = 6, KV = 2, D = 8, group = H / KV;
  const int64_t ld_g = (H + 2 * KV) * D, ld_m = 3 * H * D;
  const auto qkv = normal("qkv", B * T * ld_g);
  const auto dout = normal("dout", B * T * H * D);
  std::vector<float> mha(B * T * ld_m);
  for (int64_t n = 0; n < B * T; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t g = h / group;
        mha[n * ld_m + h * D + d] = qkv[n * ld_g + h * D + d];
        mha[n * ld_m + (H + h) * D + d] = qkv[n * ld_g + (H + g) * D + d];
        mha[n * ld_m + (2 * H + h) * D + d] = qkv[n * ld_g + (H + KV + g) * D + d];
      }
  std::vector<float> out_g(B * T * H * D), out_m(B * T * H * D), probs_g(B * H * T * T), probs_m(B * H * T * T);
  std::vector<float> d_g(B * T * ld_g), d_m(B * T * ld_m), scratch(static_cast<size_t>(attention_scratch_floats(T)));
  attention_forward(out_g.data(), probs_g.data(), qkv.data(), B, T, H, KV, D);
  attention_forward(out_m.data(), probs_m.data(), mha.data(), B, T, H, H, D);
  EXPECT_EQ(out_g, out_m);  // the same per-head products on the same values
  EXPECT_EQ(probs_g, probs_m);
  attention_backward(d_g.data(), scratch.data(), dout.data(), qkv.data(), probs_g.data(), B, T, H, KV, D);
  attention_backward(d_m.data(), scratch.data(), dout.data(), mha.data(), probs_m.data(), B, T, H, H, D);
  std::vector<float> dk_sum(B * T * KV * D, 0.0f), dv_sum(B * T * KV * D, 0.0f), dk_g, dv_g, dq_g, dq_m;
  for (int64_t n = 0; n < B * T; ++n) {
    for (int64_t h = 0; h < H; ++h)
      for (int64_t d = 0; d < D; ++d) {
        const int64_t g = h / group;
        dq_g.push_back(d_g[n * ld_g + h * D + d]);
        dq_m.push_back(d_m[n * ld_m + h * D + d]);
        dk_sum[(n * KV + g) * D + d] += d_m[n * ld_m + (H + h) * D + d];
        dv_sum[(n * KV + g) * D + d] += d_m[n * ld_m + (2 * H + h) * D + d];
      }
    for (int64_t i = 0; i < KV * D; ++i) {
      dk_g.push_back(d_g[n * ld_g + H * D + i]);
      dv_g.push_back(d_g[n * ld_g + (H + KV) * D + i]);
    }
  }
  EXPECT_EQ(dq_g, dq_m);
  // The kernel accumulates the group inside BLAS (beta = 1), the test sums afterwards: rounding only.
  expect_near_all(dk_g, dk_sum, 1e-5, 1e-6, "dk (group sum)");
  expect_near_all(dv_g, dv_sum, 1e-5, 1e-6, "dv (group sum)");
}

TEST(KernelsSemantics, AttentionFirstTokenCopiesItsValue) {
  // Position 0 attends only to itself: out[0] = v[0] exactly (P = 1).
  const int64_t T = 5, H = 2, KV = 1, D = 4, ld = (H + 2 * KV) * D;
  const auto qkv = normal("qkv", T * ld);
  std::vector<float> out(T * H * D), probs(H * T * T);
  attention_forward(out.data(), probs.data(), qkv.data(), 1, T, H, KV, D);
  for (int64_t h = 0; h < H; ++h) {
    EXPECT_EQ(probs[h * T * T], 1.0f);
    for (int64_t d = 0; d < D; ++d) EXPECT_EQ(out[h * D + d], qkv[(H + KV) * D + d]);
  }
}

// ---- RoPE ---------------------------------------------------------------------------------------

TEST(KernelsSemantics, RopeTablesClosedForm) {
  const int64_t T = 5, D = 8;
  std::vector<float> cos(T * D / 2), sin(T * D / 2);
  rope_tables(cos.data(), sin.data(), T, D, 10000.0);
  for (int64_t i = 0; i < D / 2; ++i) {
    EXPECT_EQ(cos[i], 1.0f);  // t = 0
    EXPECT_EQ(sin[i], 0.0f);
  }
  for (int64_t t = 0; t < T; ++t) {
    EXPECT_EQ(cos[t * D / 2], static_cast<float>(std::cos(static_cast<double>(t))));  // i = 0: angle t
    // i = 1: theta^(−2/8) = 10000^(−1/4) = 0.1
    EXPECT_NEAR(sin[t * D / 2 + 1], std::sin(0.1 * static_cast<double>(t)), 1e-7);
  }
}

TEST(KernelsSemantics, RopeInPlaceAndRoundTrip) {
  const int64_t B = 2, T = 6, H = 3, KV = 1, D = 10, row = (H + 2 * KV) * D;
  std::vector<float> cos(T * D / 2), sin(T * D / 2);
  rope_tables(cos.data(), sin.data(), T, D, 500000.0);
  const auto x = normal("x", B * T * row);
  std::vector<float> out(x.size(), 7.0f);
  rope_forward(out.data(), x.data(), cos.data(), sin.data(), B, T, H + KV, D, row);
  std::vector<float> in_place = x;
  rope_forward(in_place.data(), in_place.data(), cos.data(), sin.data(), B, T, H + KV, D, row);
  for (int64_t n = 0; n < B * T; ++n)
    for (int64_t i = 0; i < row; ++i) {
      const size_t k = static_cast<size_t>(n * row + i);
      if (i < (H + KV) * D) {
        EXPECT_EQ(in_place[k], out[k]) << "in-place rope differs at " << k;
      } else {
        EXPECT_EQ(in_place[k], x[k]) << "the v part must not be touched";
        EXPECT_EQ(out[k], 7.0f) << "out's v part must not be written";
      }
    }
  // The backward is the inverse rotation: backward(forward(x)) = x up to rounding, also in place.
  std::vector<float> back = in_place;
  rope_backward(back.data(), back.data(), cos.data(), sin.data(), B, T, H + KV, D, row);
  expect_near_all(back, x, 1e-6, 1e-6, "rope round trip");
  // Position 0 is the identity; the pair (i, i + D/2) keeps its norm at every position.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < D; ++i) EXPECT_EQ(in_place[b * T * row + i], x[b * T * row + i]);
  for (int64_t i = 0; i < D / 2; ++i) {
    const size_t k = static_cast<size_t>(3 * row + i), k2 = k + D / 2;
    EXPECT_NEAR(std::hypot(in_place[k], in_place[k2]), std::hypot(x[k], x[k2]), 1e-6);
  }
}

// ---- cross-entropy ------------------------------------------------------------------------------

TEST(KernelsSemantics, CrossEntropyInPlaceEqualsOutOfPlace) {
  const int64_t N = 6, V = 37;
  const auto logits = normal("logits", N * V, 3.0);
  const std::vector<int32_t> targets = {0, 36, -1, 5, 5, 17};
  std::vector<float> rowmax(N), sumexp(N), losses(N), dlogits(N * V);
  cross_entropy_forward(losses.data(), rowmax.data(), sumexp.data(), logits.data(), targets.data(), N, V);
  cross_entropy_backward(dlogits.data(), logits.data(), rowmax.data(), sumexp.data(), targets.data(), N, V, 0, 0.25f);
  std::vector<float> inplace = logits;
  cross_entropy_backward(inplace.data(), inplace.data(), rowmax.data(), sumexp.data(), targets.data(), N, V, 0, 0.25f);
  EXPECT_EQ(inplace, dlogits);
}

TEST(KernelsSemantics, CrossEntropyUniformLogitsClosedForm) {
  // All logits equal: loss = log V, dlogits = (1/V − [v = target])·scale, Σ over the row = 0.
  const int64_t N = 3, V = 50;
  std::vector<float> logits(N * V, 1.25f), rowmax(N), sumexp(N), losses(N), d(N * V);
  const std::vector<int32_t> targets = {0, 49, 7};
  const double total =
      cross_entropy_forward(losses.data(), rowmax.data(), sumexp.data(), logits.data(), targets.data(), N, V);
  for (int64_t n = 0; n < N; ++n) EXPECT_NEAR(losses[n], std::log(50.0), 1e-6);
  EXPECT_NEAR(total, 3.0 * std::log(50.0), 3e-6);
  EXPECT_EQ(total, static_cast<double>(losses[0]) + losses[1] + losses[2]);  // Σ in row order, in double
  cross_entropy_backward(d.data(), logits.data(), rowmax.data(), sumexp.data(), targets.data(), N, V, 0, 2.0f);
  for (int64_t n = 0; n < N; ++n) {
    double row_sum = 0.0;
    for (int64_t v = 0; v < V; ++v) {
      const double expect = (1.0 / 50.0 - (v == targets[n] ? 1.0 : 0.0)) * 2.0;
      EXPECT_NEAR(d[n * V + v], expect, 1e-7);
      row_sum += d[n * V + v];
    }
    EXPECT_NEAR(row_sum, 0.0, 1e-6);
  }
}

TEST(KernelsSemantics, CrossEntropyVocabSplitEqualsSingleShard) {
  // Three shards with v_begin > 0, targets inside and outside each shard, and an ignored target.
  const int64_t N = 5, V = 40;
  const auto logits = normal("logits", N * V, 2.0);
  const std::vector<int32_t> targets = {3, 39, -1, 20, 13};
  std::vector<float> rowmax(N), sumexp(N), losses(N), dfull(N * V);
  cross_entropy_forward(losses.data(), rowmax.data(), sumexp.data(), logits.data(), targets.data(), N, V);
  cross_entropy_backward(dfull.data(), logits.data(), rowmax.data(), sumexp.data(), targets.data(), N, V, 0, 0.5f);

  const int64_t begins[3] = {0, 13, 27}, counts[3] = {13, 14, 13};
  std::vector<std::vector<float>> shard(3);
  std::vector<float> gmax(N, -std::numeric_limits<float>::infinity()), gsum(N, 0.0f), gt(N, 0.0f);
  for (int r = 0; r < 3; ++r) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = 0; v < counts[r]; ++v) shard[r].push_back(logits[n * V + begins[r] + v]);
    std::vector<float> m(N);
    cross_entropy_row_max(m.data(), shard[r].data(), N, counts[r]);
    for (int64_t n = 0; n < N; ++n) gmax[n] = std::max(gmax[n], m[n]);
  }
  EXPECT_EQ(gmax, rowmax);  // max is exact under any split
  for (int r = 0; r < 3; ++r) {
    std::vector<float> s(N), t(N);
    cross_entropy_row_sumexp(s.data(), shard[r].data(), gmax.data(), N, counts[r]);
    cross_entropy_target_logit(t.data(), shard[r].data(), targets.data(), N, counts[r], begins[r]);
    for (int64_t n = 0; n < N; ++n) {
      gsum[n] += s[n];
      gt[n] += t[n];  // exactly one shard holds each valid target, the others contribute 0
    }
  }
  std::vector<float> split_losses(N);
  cross_entropy_losses(split_losses.data(), gmax.data(), gsum.data(), gt.data(), targets.data(), N);
  expect_near_all(split_losses, losses, 1e-6, 1e-6, "losses");
  EXPECT_EQ(split_losses[2], 0.0f);
  for (int r = 0; r < 3; ++r) {
    std::vector<float> d(shard[r].size());
    cross_entropy_backward(d.data(), shard[r].data(), gmax.data(), gsum.data(), targets.data(), N, counts[r], begins[r],
                           0.5f);
    std::vector<float> expect;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t v = 0; v < counts[r]; ++v) expect.push_back(dfull[n * V + begins[r] + v]);
    expect_near_all(d, expect, 1e-6, 1e-7, "dlogits shard");
  }
}

// ---- gemm ---------------------------------------------------------------------------------------

TEST(KernelsSemantics, GemmMatchesNaiveTwinForEveryLayout) {
  const int64_t M = 13, N = 21, K = 34;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.0f, 1.0f, -0.5f}) {
        // Padded leading dimensions: a row of each matrix is followed by 3 unused floats.
        const int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 3, ldc = N + 3;
        const auto a = normal("a", (ta ? K : M) * lda), b = normal("b", (tb ? N : K) * ldb);
        std::vector<float> c = normal("c", M * ldc);
        if (beta == 0.0f) c[0] = kNaN;  // beta = 0 overwrites
        std::vector<float> c_twin = c;
        gemm(c.data(), a.data(), b.data(), M, N, K, ta, tb, lda, ldb, ldc, 0.75f, beta);
        reference::gemm(c_twin.data(), a.data(), b.data(), M, N, K, ta, tb, lda, ldb, ldc, 0.75f, beta);
        expect_near_all(c, c_twin, 1e-5, 1e-5, "gemm C");
        for (int64_t i = 0; i < M; ++i)  // padding untouched
          for (int64_t j = N; j < ldc; ++j) EXPECT_EQ(c[i * ldc + j], c_twin[i * ldc + j]);
      }
}

TEST(KernelsSemantics, GemmWithEmptyInnerDimensionScalesC) {
  std::vector<float> c = {1.0f, kNaN, 3.0f, 4.0f};
  gemm(c.data(), nullptr, nullptr, 2, 2, 0, false, false, 1, 2, 2, 1.0f, 0.0f);
  EXPECT_EQ(c, (std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f}));
}

// ---- broken invariants abort with a message that names them ------------------------------------

TEST(KernelsSemanticsDeathTest, BrokenShapesAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::vector<float> buf(1024, 0.0f);
  EXPECT_DEATH(attention_forward(buf.data(), buf.data(), buf.data(), 1, 2, 3, 2, 4), "must divide H");
  EXPECT_DEATH(rope_forward(buf.data(), buf.data(), buf.data(), buf.data(), 1, 2, 1, 5, 5), "must be even");
  const std::vector<int32_t> targets = {1, 9};
  EXPECT_DEATH(cross_entropy_forward(buf.data(), buf.data(), buf.data(), buf.data(), targets.data(), 2, 9),
               "outside the vocabulary");
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::kernels
