// Mixed-precision kernels (kernels/pointwise16.h, linear16.h, attention16.h, cross_entropy16.h) in bf16 and fp16:
//  - rmsnorm16, swiglu16 (forward and backward), embedding16, cross_entropy16 equal "widen the 16-bit inputs, run the
//  fp32
//    kernel, round the 16-bit outputs" bit for bit;
//  - linear16 on the fallback backend equals the fp32 linear on the widened inputs bit for bit, and on
//    oneDNN (where this CPU has it) lies within fp32's accumulation bound of it;
//  - attention16 against a naive twin in double that rounds at the same points (P, the output, dS):
//    16-bit outputs agree bit for bit except where the two sides' fp32-vs-double difference straddles a
//    rounding boundary (derived below), fp32 gradients within a relative 2^-13.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/attention16.h"
#include "kernels/cross_entropy.h"
#include "kernels/cross_entropy16.h"
#include "kernels/embedding.h"
#include "kernels/linear16.h"
#include "kernels/matmul.h"
#include "kernels/pointwise16.h"
#include "kernels/rmsnorm.h"
#include "kernels/swiglu.h"
#include "tensor/float16.h"
#include "unity_id.h"

namespace sp::kernels {
namespace {
namespace SP_TEST_ID {

std::vector<float> normal(const std::string& name, int64_t n, double scale) {
  const PhiloxKey key = philox_key(1616, name);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(scale * random_normal(key, i));
  return v;
}
std::vector<uint16_t> narrow(const std::vector<float>& f, DType t) {
  std::vector<uint16_t> h(f.size());
  float16_from_f32(h.data(), f.data(), static_cast<int64_t>(f.size()), t);
  return h;
}
std::vector<float> widen(const std::vector<uint16_t>& h, DType t) {
  std::vector<float> f(h.size());
  f32_from_float16(f.data(), h.data(), static_cast<int64_t>(h.size()), t);
  return f;
}
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

constexpr DType kTypes[] = {DType::kBF16, DType::kF16};

TEST(Kernels16, PointwiseEqualWidenFp32Round) {
  const int64_t N = 37, C = 77, F = 45, V = 50;
  for (DType t : kTypes) {
    // rmsnorm16_forward: fp32 residual in, 16-bit out.
    const auto x = normal("x", N * C, 1.0);
    const auto w = widen(narrow(normal("w", C, 0.2), t), t);  // a widened 16-bit norm weight
    std::vector<uint16_t> out16(N * C);
    std::vector<float> rstd16(N), out32(N * C), rstd32(N);
    rmsnorm16_forward(out16.data(), rstd16.data(), x.data(), w.data(), N, C, 1e-5f, t);
    rmsnorm_forward(out32.data(), rstd32.data(), x.data(), w.data(), N, C, 1e-5f);
    EXPECT_TRUE(same_bits(out16, narrow(out32, t))) << "rmsnorm16 " << dtype_name(t);
    EXPECT_TRUE(same_bits(rstd16, rstd32));
    // rmsnorm16_apply: the same 16-bit output from the saved rstd (ZB-H1's last stage recomputes xf).
    std::vector<uint16_t> again16(N * C, 0xFFFF);
    rmsnorm16_apply(again16.data(), rstd16.data(), x.data(), w.data(), N, C, t);
    EXPECT_TRUE(same_bits(again16, out16)) << "rmsnorm16_apply " << dtype_name(t);
    // swiglu16 forward and backward.
    const auto gu = narrow(normal("gu", N * 2 * F, 2.0), t);
    const auto gu32 = widen(gu, t);
    std::vector<uint16_t> h16(N * F), dgu16(N * 2 * F);
    std::vector<float> h32(N * F), dgu32(N * 2 * F);
    swiglu16_forward(h16.data(), gu.data(), N, F, t);
    swiglu_forward(h32.data(), gu32.data(), N, F);
    EXPECT_TRUE(same_bits(h16, narrow(h32, t))) << "swiglu16_forward " << dtype_name(t);
    const auto dh = normal("dh", N * F, 0.1);
    swiglu16_backward(dgu16.data(), dh.data(), gu.data(), N, F, t);
    swiglu_backward(dgu32.data(), dh.data(), gu32.data(), N, F);
    EXPECT_TRUE(same_bits(dgu16, narrow(dgu32, t))) << "swiglu16_backward " << dtype_name(t);
    // embedding16: a vocab shard [3, 3 + V − 5) of a 16-bit table.
    const auto table = narrow(normal("table", (V - 5) * C, 1.0), t);
    std::vector<int32_t> tok(N);
    for (int64_t n = 0; n < N; ++n) tok[static_cast<size_t>(n)] = static_cast<int32_t>((n * 7) % V);
    std::vector<float> e16(N * C, std::nanf("")), e32(N * C);
    embedding16_forward(e16.data(), tok.data(), table.data(), N, C, 3, V - 5, t);
    embedding_forward(e32.data(), tok.data(), widen(table, t).data(), N, C, 3, V - 5);
    EXPECT_TRUE(same_bits(e16, e32)) << "embedding16 " << dtype_name(t);
  }
}

// Cross-entropy over 16-bit logits: the fp32 parts on the widened logits, bit for bit, with a vocabulary
// shard [4, 4 + V), an ignored target and targets outside the shard; the backward rounded once, in place.
TEST(Kernels16, CrossEntropyEqualsFp32OnWidenedLogits) {
  const int64_t N = 9, V = 53, v_begin = 4;
  for (DType t : kTypes) {
    const auto logits16 = narrow(normal("logits", N * V, 3.0), t);
    const auto logits32 = widen(logits16, t);
    std::vector<int32_t> targets(N);
    for (int64_t n = 0; n < N; ++n) targets[static_cast<size_t>(n)] = static_cast<int32_t>((n * 11) % (V + 8));
    targets[2] = -1;
    std::vector<float> row(V), max16(N), max32(N), sum16(N), sum32(N), tl16(N, -1.0f), tl32(N);
    cross_entropy16_row_max(max16.data(), logits16.data(), N, V, t, row.data());
    cross_entropy_row_max(max32.data(), logits32.data(), N, V);
    EXPECT_TRUE(same_bits(max16, max32)) << dtype_name(t);
    cross_entropy16_row_sumexp(sum16.data(), logits16.data(), max32.data(), N, V, t, row.data());
    cross_entropy_row_sumexp(sum32.data(), logits32.data(), max32.data(), N, V);
    EXPECT_TRUE(same_bits(sum16, sum32)) << dtype_name(t);
    cross_entropy16_target_logit(tl16.data(), logits16.data(), targets.data(), N, V, v_begin, t);
    cross_entropy_target_logit(tl32.data(), logits32.data(), targets.data(), N, V, v_begin);
    EXPECT_TRUE(same_bits(tl16, tl32)) << dtype_name(t);
    auto d16 = logits16;  // in place
    std::vector<float> d32(N * V);
    cross_entropy16_backward(d16.data(), d16.data(), max32.data(), sum32.data(), targets.data(), N, V, v_begin, 0.125f,
                             t, row.data());
    cross_entropy_backward(d32.data(), logits32.data(), max32.data(), sum32.data(), targets.data(), N, V, v_begin,
                           0.125f);
    EXPECT_TRUE(same_bits(d16, narrow(d32, t))) << dtype_name(t);
  }
}

std::vector<Gemm16Kind> available(DType t) {
  std::vector<Gemm16Kind> kinds = {Gemm16Kind::kFallback};
  if (t == DType::kBF16 ? gemm16_capability().onednn_bf16 : gemm16_capability().onednn_f16)
    kinds.push_back(Gemm16Kind::kOneDnn);
  return kinds;
}

TEST(Kernels16, LinearAgainstFp32OnWidenedInputs) {
  set_blas_threads(1);
  const int64_t N = 67, IC = 77, OC = 50;
  for (DType t : kTypes) {
    const auto x = narrow(normal("x", N * IC, 1.0), t);
    const auto w = narrow(normal("w", OC * IC, 1.0 / std::sqrt(77.0)), t);
    const auto dy = narrow(normal("dy", N * OC, 0.1), t);
    const auto x32 = widen(x, t), w32 = widen(w, t), dy32 = widen(dy, t);
    std::vector<float> y(N * OC), dx(N * IC), dw(OC * IC, 0.5f);
    linear_forward(y.data(), x32.data(), w32.data(), N, IC, OC);
    linear_backward(dx.data(), dw.data(), dy32.data(), x32.data(), w32.data(), N, IC, OC, false);
    for (Gemm16Kind kind : available(t)) {
      auto g = std::move(make_gemm16(kind, t)).value();
      std::vector<float> ws(static_cast<size_t>(linear16_workspace_floats(*g, N, IC, OC)) + 1);
      std::vector<float> y16(N * OC, std::nanf("")), dx16(N * IC, std::nanf("")), dw16(OC * IC, 0.5f);
      linear16_forward(y16.data(), x.data(), w.data(), N, IC, OC, *g, ws.data());
      linear16_backward(dx16.data(), dw16.data(), dy.data(), x.data(), w.data(), N, IC, OC, false, *g, ws.data());
      if (kind == Gemm16Kind::kFallback) {
        EXPECT_TRUE(same_bits(y16, y)) << dtype_name(t);
        EXPECT_TRUE(same_bits(dx16, dx)) << dtype_name(t);
        EXPECT_TRUE(same_bits(dw16, dw)) << dtype_name(t);
      } else {
        // Two fp32 summations of the same exact products of K terms are ≤ 2·K·u·Σ|terms| apart, with
        // Σ|terms| the same products of the absolute values (u = 2^-24).
        auto abs_of = [](std::vector<float> v) {
          for (float& e : v) e = std::fabs(e);
          return v;
        };
        std::vector<float> ay(N * OC), adx(N * IC), adw(OC * IC, 0.5f);
        linear_forward(ay.data(), abs_of(x32).data(), abs_of(w32).data(), N, IC, OC);
        linear_backward(adx.data(), adw.data(), abs_of(dy32).data(), abs_of(x32).data(), abs_of(w32).data(), N, IC, OC,
                        false);
        auto check = [&](const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& mag,
                         int64_t K, const char* what) {
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_LE(std::fabs(double(got[i]) - want[i]), 2.0 * K * 0x1p-24 * mag[i] + 1e-30)
                << g->name() << " " << what;
        };
        check(y16, y, ay, IC, "y");
        check(dx16, dx, adx, OC, "dx");
        check(dw16, dw, adw, N + 1, "dw");
      }
    }
  }
}

// overwrite_dw (β = 0, a fresh leaf's block products): the same values as += into a zero dw, on every backend, and
// nothing of dw's old contents read — where dw held garbage it is gone; without it dw accumulates.
TEST(Kernels16, WeightGradientOverwriteIsAccumulateIntoZero) {
  set_blas_threads(1);
  const int64_t N = 67, IC = 77, OC = 50;
  for (DType t : kTypes) {
    const auto x = narrow(normal("x", N * IC, 1.0), t);
    const auto dy = narrow(normal("dy", N * OC, 0.1), t);
    for (Gemm16Kind kind : available(t)) {
      auto g = std::move(make_gemm16(kind, t)).value();
      std::vector<float> ws(static_cast<size_t>(linear16_workspace_floats(*g, N, IC, OC)) + 1);
      std::vector<float> acc(OC * IC, 0.0f), over(OC * IC, std::nanf("")), twice(OC * IC, 0.0f);
      linear16_backward(nullptr, acc.data(), dy.data(), x.data(), nullptr, N, IC, OC, false, *g, ws.data());
      linear16_backward(nullptr, over.data(), dy.data(), x.data(), nullptr, N, IC, OC, false, *g, ws.data(), true);
      for (size_t i = 0; i < acc.size(); ++i) ASSERT_EQ(acc[i], over[i]) << g->name() << " " << i;  // +0 == −0
      linear16_backward(nullptr, twice.data(), dy.data(), x.data(), nullptr, N, IC, OC, false, *g, ws.data(), true);
      linear16_backward(nullptr, twice.data(), dy.data(), x.data(), nullptr, N, IC, OC, false, *g, ws.data());
      for (size_t i = 0; i < acc.size(); ++i) ASSERT_EQ(twice[i], acc[i] + acc[i]) << g->name() << " " << i;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// attention16 against a naive twin in double with the same rounding points.

struct Attn {
  int64_t B = 2, T = 70, H = 4, KV = 2, D = 16;
  int64_t ld() const { return (H + 2 * KV) * D; }
};

uint16_t round16(double v, DType t) {
  return t == DType::kBF16 ? bf16_from_f32(static_cast<float>(v)) : f16_from_f32(static_cast<float>(v));
}
double wide16(uint16_t h, DType t) { return t == DType::kBF16 ? f32_from_bf16(h) : f32_from_f16(h); }

// The twin. Forward: S = q·kᵀ/√D, P = round(softmax(S)), out = round(P·v). Backward: dP = dout·vᵀ,
// dS = round(P ⊙ (dP − Σ P⊙dP)), dq = dS·k/√D, dk = Σ_g dSᵀ·q/√D, dv = Σ_g Pᵀ·dout. All sums in double.
void attention_twin(const Attn& s, DType t, const std::vector<uint16_t>& qkv, const std::vector<uint16_t>& dout,
                    std::vector<uint16_t>& out, std::vector<uint16_t>& probs, std::vector<double>& dqkv) {
  const int64_t T = s.T, D = s.D, ld = s.ld(), ldo = s.H * D, group = s.H / s.KV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  auto at = [&](int64_t b, int64_t i, int64_t col) {
    return wide16(qkv[static_cast<size_t>((b * T + i) * ld + col)], t);
  };
  dqkv.assign(qkv.size(), 0.0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t qc = h * D, kc = (s.H + h / group) * D, vc = (s.H + s.KV + h / group) * D;
      std::vector<double> p(static_cast<size_t>(T * T), 0.0), ds(static_cast<size_t>(T * T), 0.0);
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> row(static_cast<size_t>(i + 1));
        double m = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < D; ++d) acc += at(b, i, qc + d) * at(b, j, kc + d);
          row[static_cast<size_t>(j)] = acc * scale;
          m = std::max(m, row[static_cast<size_t>(j)]);
        }
        double sum = 0;
        for (double& r : row) sum += (r = std::exp(r - m));
        for (int64_t j = 0; j < T; ++j) {
          const uint16_t pr = j <= i ? round16(row[static_cast<size_t>(j)] / sum, t) : 0;
          probs[static_cast<size_t>(((b * s.H + h) * T + i) * T + j)] = pr;
          p[static_cast<size_t>(i * T + j)] = wide16(pr, t);
        }
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += p[static_cast<size_t>(i * T + j)] * at(b, j, vc + d);
          out[static_cast<size_t>((b * T + i) * ldo + h * D + d)] = round16(acc, t);
        }
      }
      auto dO = [&](int64_t i, int64_t d) {
        return wide16(dout[static_cast<size_t>((b * T + i) * ldo + h * D + d)], t);
      };
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> dp(static_cast<size_t>(i + 1));
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < D; ++d) acc += dO(i, d) * at(b, j, vc + d);
          dp[static_cast<size_t>(j)] = acc;
          sum += p[static_cast<size_t>(i * T + j)] * acc;
        }
        for (int64_t j = 0; j <= i; ++j)
          ds[static_cast<size_t>(i * T + j)] =
              wide16(round16(p[static_cast<size_t>(i * T + j)] * (dp[static_cast<size_t>(j)] - sum), t), t);
      }
      for (int64_t i = 0; i < T; ++i)
        for (int64_t d = 0; d < D; ++d) {
          double dq = 0, dk = 0, dv = 0;
          for (int64_t j = 0; j < T; ++j) {
            dq += ds[static_cast<size_t>(i * T + j)] * at(b, j, kc + d);
            dk += ds[static_cast<size_t>(j * T + i)] * at(b, j, qc + d);
            dv += p[static_cast<size_t>(j * T + i)] * dO(j, d);
          }
          dqkv[static_cast<size_t>((b * T + i) * ld + qc + d)] = dq * scale;
          dqkv[static_cast<size_t>((b * T + i) * ld + kc + d)] += dk * scale;
          dqkv[static_cast<size_t>((b * T + i) * ld + vc + d)] += dv;
        }
    }
}

TEST(Kernels16, AttentionAgainstRoundingTwin) {
  set_blas_threads(1);
  const Attn s;
  const int64_t n_qkv = s.B * s.T * s.ld(), n_out = s.B * s.T * s.H * s.D, n_p = s.B * s.H * s.T * s.T;
  for (DType t : kTypes) {
    const auto qkv = narrow(normal("qkv", n_qkv, 1.0), t);
    const auto dout = narrow(normal("dout", n_out, 0.1), t);
    std::vector<uint16_t> out_twin(n_out), p_twin(n_p);
    std::vector<double> dqkv_twin;
    attention_twin(s, t, qkv, dout, out_twin, p_twin, dqkv_twin);
    for (Gemm16Kind kind : available(t)) {
      auto g = std::move(make_gemm16(kind, t)).value();
      std::vector<float> scratch(static_cast<size_t>(attention16_scratch_floats(s.T, s.D)));
      std::vector<float> ws(static_cast<size_t>(attention16_workspace_floats(*g, s.T, s.D)) + 1);
      std::vector<uint16_t> out(n_out, 0xFFFF), p(n_p, 0xFFFF);
      std::vector<float> dqkv(n_qkv, std::nanf(""));
      attention16_forward(out.data(), p.data(), qkv.data(), s.B, s.T, s.H, s.KV, s.D, *g, scratch.data(), ws.data());
      attention16_backward(dqkv.data(), dout.data(), qkv.data(), p.data(), s.B, s.T, s.H, s.KV, s.D, *g, scratch.data(),
                           ws.data());
      // 16-bit outputs: the fast side's value before rounding differs from the twin's by fp32 accumulation
      // (≲ √K·2^-24 relative) and exp_fast (≤ 2 ulp); a rounding boundary lies in between with probability
      // ≈ that difference / the 16-bit ulp ≈ 2^-13 (bf16) to 2^-10 (fp16), and then the results are one
      // 16-bit ulp apart (a flipped P moves the output by at most one ulp of P times |v|). So: at most
      // 1 % of the values differ, and none by more than 2 ulps of the 16-bit format at the value's scale.
      auto check16 = [&](const std::vector<uint16_t>& got, const std::vector<uint16_t>& want, const char* what) {
        int64_t differ = 0;
        double worst_ulps = 0;
        const double ulp = t == DType::kBF16 ? 0x1p-7 : 0x1p-10;
        for (size_t i = 0; i < got.size(); ++i) {
          if (got[i] == want[i]) continue;
          ++differ;
          const double a = wide16(got[i], t), b = wide16(want[i], t);
          worst_ulps = std::max(worst_ulps, std::fabs(a - b) / (ulp * std::max(std::fabs(b), 0x1p-14)));
        }
        std::printf("%s %s %s: %lld of %zu differ, worst %.2f ulp\n", g->name().c_str(), dtype_name(t).data(), what,
                    static_cast<long long>(differ), got.size(), worst_ulps);
        EXPECT_LE(differ, static_cast<int64_t>(got.size()) / 100) << what;
        EXPECT_LE(worst_ulps, 2.0) << what;
      };
      check16(p, p_twin, "probs");
      check16(out, out_twin, "out");
      // fp32 gradient: relative L2 distance. Sources: fp32 accumulation (~2^-20) and the rare dS/P flips
      // (each moves a few sums by one 16-bit ulp of one term): far below 2^-13 ≈ 1.2e-4, while a missing
      // rounding of dS (every term off by up to half an ulp, 2^-9 for bf16) gives ~1e-3.
      double num = 0, den = 0;
      for (size_t i = 0; i < dqkv.size(); ++i) {
        num += (dqkv[i] - dqkv_twin[i]) * (dqkv[i] - dqkv_twin[i]);
        den += dqkv_twin[i] * dqkv_twin[i];
      }
      const double rel = std::sqrt(num / den);
      std::printf("%s %s dqkv: relative L2 difference %.3g\n", g->name().c_str(), dtype_name(t).data(), rel);
      EXPECT_LE(rel, 0x1p-13) << g->name() << " " << dtype_name(t);
      // Determinism: twice, the same bits.
      std::vector<uint16_t> out2(n_out), p2(n_p);
      std::vector<float> dqkv2(n_qkv);
      attention16_forward(out2.data(), p2.data(), qkv.data(), s.B, s.T, s.H, s.KV, s.D, *g, scratch.data(), ws.data());
      attention16_backward(dqkv2.data(), dout.data(), qkv.data(), p2.data(), s.B, s.T, s.H, s.KV, s.D, *g,
                           scratch.data(), ws.data());
      EXPECT_TRUE(same_bits(out, out2) && same_bits(p, p2) && same_bits(dqkv, dqkv2)) << g->name();
    }
  }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::kernels
