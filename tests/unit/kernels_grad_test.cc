// Table-driven kernel tests: one row per op (a lambda that runs its forward and backward on a case
// of named buffers); adding an op adds a row. For every row:
//  (1) fast kernel vs its naive twin: every forward output, saved buffer and gradient agree within the
//      row's bound where it derives one (linear: the forward error bound of an fp32 dot product, computed
//      per element from the inputs, plus the twin's own rounding), else within the measured tolerance
//      |fast − twin| ≤ 1e-6 + 1e-5·|twin| (docs/kernels.md §"Tests and tolerances"), at the small odd
//      sizes and at sizes that cross the vector widths and the attention block (T = 70 > 64);
//  (2) the twin's gradients vs central finite differences of L = Σ out·R in double, at small odd
//      sizes, with the tolerance derived in fd_tolerance();
//  (3) determinism: the fast kernel run twice on the same inputs gives identical bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/attention.h"
#include "kernels/cross_entropy.h"
#include "kernels/embedding.h"
#include "kernels/matmul.h"
#include "kernels/reference/attention.h"
#include "kernels/reference/cross_entropy.h"
#include "kernels/reference/embedding.h"
#include "kernels/reference/matmul.h"
#include "kernels/reference/rmsnorm.h"
#include "kernels/reference/rope.h"
#include "kernels/reference/swiglu.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "unity_id.h"

namespace sp::kernels {
namespace {
namespace SP_TEST_ID {

enum class Impl { kFast, kReference };

// Picks the fast kernel or its twin; both have the same signature.
template <typename F>
F pick(Impl impl, F fast, F twin) {
  return impl == Impl::kFast ? fast : twin;
}

// Sizes of one case (docs/glossary.md letters). N is the token count of the per-token ops; the
// sequence ops (rope, attention) use B·T tokens.
struct Sizes {
  const char* label;
  int64_t N, C, OC, B, T, H, KV, D, F, V;
};

constexpr Sizes kSmall = {"small", 5, 7, 9, 2, 3, 4, 2, 6, 5, 11};
constexpr Sizes kMedium = {"medium", 67, 77, 50, 2, 70, 4, 2, 16, 45, 301};
constexpr Sizes kWide = {"wide", 300, 256, 130, 1, 130, 2, 1, 64, 200, 1000};

// One case: named fp32 buffers plus integer ids. `inputs` are differentiated (gradient buffer
// "d" + name), `outputs` enter the loss with R = buffer "d" + name, `saved` are forward results that
// are compared but are not loss terms.
struct Case {
  std::map<std::string, std::vector<float>> buf;
  std::vector<int32_t> ids;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> saved;
  int64_t v_begin = 0;  // embedding: first vocab row held by this "rank"

  std::vector<float>& operator[](const std::string& name) { return buf.at(name); }
  float* f(const std::string& name) { return buf.at(name).data(); }
};

// Per-element tolerances of fast vs twin, by buffer name (a buffer not named gets the measured default).
using Bounds = std::map<std::string, std::vector<double>>;

struct OpRow {
  const char* name;
  std::function<Case(const Sizes&)> make;              // random inputs and R, zeroed outputs and gradients
  std::function<void(Impl, const Sizes&, Case&)> run;  // forward, then backward with dout = R
  // Optional: bounds on |fast − twin| derived from the inputs and the twin's results (`twin`, after run).
  std::function<Bounds(const Sizes&, Case& twin)> bound = nullptr;
};

// Rounding error bounds (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., §2.2 and §3.1).
// u: the unit roundoff of fp32 (round to nearest); γ_k = k·u / (1 − k·u).
constexpr double kU32 = 0x1p-24;
constexpr double kU64 = 0x1p-53;
double gamma_of(int64_t k, double u) { return static_cast<double>(k) * u / (1.0 - static_cast<double>(k) * u); }

// |fast − twin| for one element of a product C (+)= Σ_{k<K} a_k·b_k whose magnitude sum is S = Σ|a_k||b_k|:
//  the fast fp32 kernel, in any summation order, blocking or FMA use:  |fast − exact| ≤ γ_{K+1}(u32)·S
//    (Higham eq. 3.5 and the remark after it: the bound holds for every order; K + 1 terms because sgemm
//    may add the product into C — here C is zero, so that term is exact);
//  the twin, a double accumulation rounded once to fp32:  |twin − exact| ≤ γ_K(u64)·S + u32·|twin|.
// Their sum bounds |fast − twin| on every CPU and BLAS; it is a bound, not an estimate (the observed
// differences are about 100× smaller), so a wrong term, index or missing product still exceeds it.
std::vector<double> dot_product_bound(const std::vector<double>& S, const std::vector<float>& twin, int64_t K) {
  std::vector<double> tol(S.size());
  for (size_t i = 0; i < S.size(); ++i)
    tol[i] = (gamma_of(K + 1, kU32) + gamma_of(K, kU64)) * S[i] + kU32 * std::fabs(static_cast<double>(twin[i]));
  return tol;
}

// S = Σ_k |a_k|·|b_k| of the linear layer's three products (matmul.h), in double:
//   y (N, OC) = x·wᵀ (K = IC);  dx (N, IC) = dy·w (K = OC);  dw (OC, IC) = dyᵀ·x (K = N).
Bounds linear_bounds(const Sizes& s, Case& c) {
  const int64_t N = s.N, IC = s.C, OC = s.OC;
  const float *x = c.f("x"), *w = c.f("w"), *dy = c.f("dy");
  std::vector<double> sy(static_cast<size_t>(N * OC), 0.0), sdx(static_cast<size_t>(N * IC), 0.0),
      sdw(static_cast<size_t>(OC * IC), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t i = 0; i < IC; ++i) {
        const double ax = std::fabs(x[n * IC + i]), aw = std::fabs(w[o * IC + i]), ady = std::fabs(dy[n * OC + o]);
        sy[static_cast<size_t>(n * OC + o)] += ax * aw;
        sdx[static_cast<size_t>(n * IC + i)] += ady * aw;
        sdw[static_cast<size_t>(o * IC + i)] += ady * ax;
      }
  return {{"y", dot_product_bound(sy, c["y"], IC)},
          {"dx", dot_product_bound(sdx, c["dx"], OC)},
          {"dw", dot_product_bound(sdw, c["dw"], N)}};
}

// Deterministic normal samples for buffer `name` (Philox stream keyed by the name).
std::vector<float> normal(const std::string& name, int64_t n, double scale, double shift = 0.0) {
  const PhiloxKey key = philox_key(2024, name);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(shift + scale * random_normal(key, i));
  return v;
}

void add_input(Case& c, const std::string& name, std::vector<float> values) {
  const size_t n = values.size();
  c.buf["d" + name] = std::vector<float>(n, 0.0f);
  c.buf[name] = std::move(values);
  c.inputs.push_back(name);
}

// An output of n elements with R ~ N(0, r_scale²) in "d" + name.
void add_output(Case& c, const std::string& name, int64_t n, double r_scale) {
  c.buf[name] = std::vector<float>(static_cast<size_t>(n), 0.0f);
  c.buf["d" + name] = normal("R." + name, n, r_scale);
  c.outputs.push_back(name);
}

void add_saved(Case& c, const std::string& name, int64_t n) {
  c.buf[name] = std::vector<float>(static_cast<size_t>(n), 0.0f);
  c.saved.push_back(name);
}

// Cross-entropy targets: mostly valid ids, one ignored (−1) when there are at least 3 rows.
std::vector<int32_t> targets(int64_t N, int64_t V) {
  const PhiloxKey key = philox_key(2024, "targets");
  std::vector<int32_t> t(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n) t[static_cast<size_t>(n)] = static_cast<int32_t>(random_u64(key, n) % V);
  if (N >= 3) t[1] = -1;
  return t;
}

// ---------------------------------------------------------------------------------------------
// The table. Inputs are scaled as in a network at initialization: activations O(1), weights
// O(1/sqrt(fan_in)), R (the upstream gradient) O(1/sqrt(N)) where the backward sums over tokens.

const std::vector<OpRow>& op_table() {
  static const std::vector<OpRow> table = {
      {"linear",
       [](const Sizes& s) {
         Case c;
         add_input(c, "x", normal("x", s.N * s.C, 1.0));
         add_input(c, "w", normal("w", s.OC * s.C, 1.0 / std::sqrt(static_cast<double>(s.C))));
         add_output(c, "y", s.N * s.OC, 1.0 / std::sqrt(static_cast<double>(s.N)));
         return c;
       },
       [](Impl impl, const Sizes& s, Case& c) {
         pick(impl, linear_forward, reference::linear_forward)(c.f("y"), c.f("x"), c.f("w"), s.N, s.C, s.OC);
         pick(impl, linear_backward, reference::linear_backward)(c.f("dx"), c.f("dw"), c.f("dy"), c.f("x"), c.f("w"),
                                                                 s.N, s.C, s.OC, false);
       },
       linear_bounds},
      {"embedding_vocab_shard",
       [](const Sizes& s) {
         // This "rank" holds rows [2, V − 1); token ids cover [0, V), so some fall outside.
         Case c;
         c.v_begin = 2;
         add_input(c, "table", normal("table", (s.V - 3) * s.C, 1.0));
         add_output(c, "out", s.N * s.C, 1.0);
         c.ids = targets(s.N, s.V);
         c.ids[0] = 0;                                                         // below the shard
         c.ids[static_cast<size_t>(s.N - 1)] = static_cast<int32_t>(s.V - 1);  // above the shard
         if (s.N >= 4) c.ids[1] = c.ids[2] = 3;                                // a repeated row accumulates
         return c;
       },
       [](Impl impl, const Sizes& s, Case& c) {
         const int64_t v_count = s.V - 3;
         pick(impl, embedding_forward, reference::embedding_forward)(c.f("out"), c.ids.data(), c.f("table"), s.N, s.C,
                                                                     c.v_begin, v_count);
         pick(impl, embedding_backward, reference::embedding_backward)(c.f("dtable"), c.f("dout"), c.ids.data(), s.N,
                                                                       s.C, c.v_begin, v_count);
       }},
      {"rmsnorm",
       [](const Sizes& s) {
         Case c;
         add_input(c, "x", normal("x", s.N * s.C, 1.0));
         add_input(c, "w", normal("w", s.C, 0.2, 1.0));
         add_output(c, "out", s.N * s.C, 1.0 / std::sqrt(static_cast<double>(s.N)));
         add_saved(c, "rstd", s.N);
         return c;
       },
       [](Impl impl, const Sizes& s, Case& c) {
         pick(impl, rmsnorm_forward, reference::rmsnorm_forward)(c.f("out"), c.f("rstd"), c.f("x"), c.f("w"), s.N, s.C,
                                                                 1e-5f);
         pick(impl, rmsnorm_backward, reference::rmsnorm_backward)(c.f("dx"), c.f("dw"), c.f("dout"), c.f("x"),
                                                                   c.f("w"), c.f("rstd"), s.N, s.C);
       }},
      {"rope_qk_of_fused_qkv",
       [](const Sizes& s) {
         // Rows of a fused qkv buffer: the q and k heads are rotated, the v part is not touched.
         Case c;
         const int64_t row = (s.H + 2 * s.KV) * s.D;
         add_input(c, "x", normal("x", s.B * s.T * row, 1.0));
         add_output(c, "out", s.B * s.T * row, 1.0);
         add_saved(c, "cos", s.T * s.D / 2);
         add_saved(c, "sin", s.T * s.D / 2);
         return c;
       },
       [](Impl impl, const Sizes& s, Case& c) {
         const int64_t row = (s.H + 2 * s.KV) * s.D;
         pick(impl, rope_tables, reference::rope_tables)(c.f("cos"), c.f("sin"), s.T, s.D, 10000.0);
         pick(impl, rope_forward, reference::rope_forward)(c.f("out"), c.f("x"), c.f("cos"), c.f("sin"), s.B, s.T,
                                                           s.H + s.KV, s.D, row);
         pick(impl, rope_backward, reference::rope_backward)(c.f("dx"), c.f("dout"), c.f("cos"), c.f("sin"), s.B, s.T,
                                                             s.H + s.KV, s.D, row);
       }},
      {"attention_gqa",
       [](const Sizes& s) {
         Case c;
         add_input(c, "qkv", normal("qkv", s.B * s.T * (s.H + 2 * s.KV) * s.D, 1.0));
         add_output(c, "out", s.B * s.T * s.H * s.D, 1.0);
         add_saved(c, "probs", s.B * s.H * s.T * s.T);
         return c;
       },
       [](Impl impl, const Sizes& s, Case& c) {
         std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(s.T)));
         pick(impl, attention_forward, reference::attention_forward)(c.f("out"), c.f("probs"), c.f("qkv"), s.B, s.T,
                                                                     s.H, s.KV, s.D);
         pick(impl, attention_backward, reference::attention_backward)(
             c.f("dqkv"), scratch.data(), c.f("dout"), c.f("qkv"), c.f("probs"), s.B, s.T, s.H, s.KV, s.D);
       }},
      {"attention_mha",
       [](const Sizes& s) {
         Case c;
         add_input(c, "qkv", normal("qkv", s.B * s.T * 3 * s.H * s.D, 1.0));
         add_output(c, "out", s.B * s.T * s.H * s.D, 1.0);
         add_saved(c, "probs", s.B * s.H * s.T * s.T);
         return c;
       },
       [](Impl impl, const Sizes& s, Case& c) {
         std::vector<float> scratch(static_cast<size_t>(attention_scratch_floats(s.T)));
         pick(impl, attention_forward, reference::attention_forward)(c.f("out"), c.f("probs"), c.f("qkv"), s.B, s.T,
                                                                     s.H, s.H, s.D);
         pick(impl, attention_backward, reference::attention_backward)(
             c.f("dqkv"), scratch.data(), c.f("dout"), c.f("qkv"), c.f("probs"), s.B, s.T, s.H, s.H, s.D);
       }},
      {"swiglu",
       [](const Sizes& s) {
         Case c;
         add_input(c, "gu", normal("gu", s.N * 2 * s.F, 2.0));
         add_output(c, "out", s.N * s.F, 1.0);
         return c;
       },
       [](Impl impl, const Sizes& s, Case& c) {
         pick(impl, swiglu_forward, reference::swiglu_forward)(c.f("out"), c.f("gu"), s.N, s.F);
         pick(impl, swiglu_backward, reference::swiglu_backward)(c.f("dgu"), c.f("dout"), c.f("gu"), s.N, s.F);
       }},
      {"cross_entropy",
       [](const Sizes& s) {
         // The backward takes one scale for all rows, so R is uniform: L = scale·Σ losses.
         Case c;
         add_input(c, "logits", normal("logits", s.N * s.V, 2.0));
         add_output(c, "losses", s.N, 1.0);
         c["dlosses"].assign(static_cast<size_t>(s.N), 0.37f);
         add_saved(c, "rowmax", s.N);
         add_saved(c, "sumexp", s.N);
         c.ids = targets(s.N, s.V);
         return c;
       },
       [](Impl impl, const Sizes& s, Case& c) {
         pick(impl, cross_entropy_forward, reference::cross_entropy_forward)(
             c.f("losses"), c.f("rowmax"), c.f("sumexp"), c.f("logits"), c.ids.data(), s.N, s.V);
         pick(impl, cross_entropy_backward, reference::cross_entropy_backward)(
             c.f("dlogits"), c.f("logits"), c.f("rowmax"), c.f("sumexp"), c.ids.data(), s.N, s.V, 0, c["dlosses"][0]);
       }},
      {"cross_entropy_vocab_parallel",
       [](const Sizes& s) {
         // Two "ranks" hold vocab [0, V1) and [V1, V); max and sums are combined as an all-reduce would.
         Case c;
         add_input(c, "logits", normal("logits", s.N * s.V, 2.0));
         add_output(c, "losses", s.N, 1.0);
         c["dlosses"].assign(static_cast<size_t>(s.N), 0.37f);
         add_saved(c, "rowmax", s.N);
         add_saved(c, "sumexp", s.N);
         c.ids = targets(s.N, s.V);
         return c;
       },
       [](Impl impl, const Sizes& s, Case& c) {
         const int64_t N = s.N, V = s.V, v1 = V / 3;
         const int64_t begin[2] = {0, v1};
         const int64_t count[2] = {v1, V - v1};
         // Shard r's logits (N, count[r]) are copied out of the full (N, V) buffer.
         std::vector<float> shard[2], part_max[2], part_sum[2], part_t[2];
         for (int r = 0; r < 2; ++r) {
           shard[r].resize(static_cast<size_t>(N * count[r]));
           for (int64_t n = 0; n < N; ++n)
             std::memcpy(&shard[r][static_cast<size_t>(n * count[r])], c.f("logits") + n * V + begin[r],
                         static_cast<size_t>(count[r]) * sizeof(float));
           part_max[r].resize(static_cast<size_t>(N));
           part_sum[r].resize(static_cast<size_t>(N));
           part_t[r].resize(static_cast<size_t>(N));
           pick(impl, cross_entropy_row_max, reference::cross_entropy_row_max)(part_max[r].data(), shard[r].data(), N,
                                                                               count[r]);
         }
         std::vector<float> tlogit(static_cast<size_t>(N));
         for (int64_t n = 0; n < N; ++n) c["rowmax"][n] = std::max(part_max[0][n], part_max[1][n]);  // MAX
         for (int r = 0; r < 2; ++r) {
           pick(impl, cross_entropy_row_sumexp, reference::cross_entropy_row_sumexp)(
               part_sum[r].data(), shard[r].data(), c.f("rowmax"), N, count[r]);
           pick(impl, cross_entropy_target_logit, reference::cross_entropy_target_logit)(
               part_t[r].data(), shard[r].data(), c.ids.data(), N, count[r], begin[r]);
         }
         for (int64_t n = 0; n < N; ++n) {  // SUM
           c["sumexp"][n] = part_sum[0][n] + part_sum[1][n];
           tlogit[n] = part_t[0][n] + part_t[1][n];
         }
         pick(impl, cross_entropy_losses, reference::cross_entropy_losses)(c.f("losses"), c.f("rowmax"), c.f("sumexp"),
                                                                           tlogit.data(), c.ids.data(), N);
         for (int r = 0; r < 2; ++r) {
           std::vector<float> dshard(shard[r].size());
           pick(impl, cross_entropy_backward, reference::cross_entropy_backward)(
               dshard.data(), shard[r].data(), c.f("rowmax"), c.f("sumexp"), c.ids.data(), N, count[r], begin[r],
               c["dlosses"][0]);
           for (int64_t n = 0; n < N; ++n)
             std::memcpy(c.f("dlogits") + n * V + begin[r], &dshard[static_cast<size_t>(n * count[r])],
                         static_cast<size_t>(count[r]) * sizeof(float));
         }
       }},
  };
  return table;
}

// Runs a row with all gradients zeroed first (parameter and residual gradients accumulate).
void run_fresh(const OpRow& row, Impl impl, const Sizes& s, Case& c) {
  for (const std::string& in : c.inputs) std::fill(c["d" + in].begin(), c["d" + in].end(), 0.0f);
  row.run(impl, s, c);
}

double loss_of(Case& c) {
  double l = 0.0;
  for (const std::string& out : c.outputs) {
    const std::vector<float>& o = c[out];
    const std::vector<float>& r = c["d" + out];
    for (size_t i = 0; i < o.size(); ++i) l += static_cast<double>(o[i]) * r[i];
  }
  return l;
}

double abs_loss_of(Case& c) {
  double l = 0.0;
  for (const std::string& out : c.outputs) {
    const std::vector<float>& o = c[out];
    const std::vector<float>& r = c["d" + out];
    for (size_t i = 0; i < o.size(); ++i) l += std::fabs(static_cast<double>(o[i]) * r[i]);
  }
  return l;
}

std::vector<std::string> compared_buffers(const Case& c) {
  std::vector<std::string> names = c.outputs;
  names.insert(names.end(), c.saved.begin(), c.saved.end());
  for (const std::string& in : c.inputs) names.push_back("d" + in);
  return names;
}

class KernelTable : public ::testing::TestWithParam<size_t> {
 protected:
  const OpRow& row() const { return op_table()[GetParam()]; }
};

TEST_P(KernelTable, FastMatchesNaiveTwin) {
  for (const Sizes& s : {kSmall, kMedium, kWide}) {
    Case twin = row().make(s);
    Case fast = twin;
    run_fresh(row(), Impl::kReference, s, twin);
    run_fresh(row(), Impl::kFast, s, fast);
    const Bounds bounds = row().bound ? row().bound(s, twin) : Bounds{};
    for (const std::string& name : compared_buffers(twin)) {
      const std::vector<float>& a = fast[name];
      const std::vector<float>& b = twin[name];
      const auto bound = bounds.find(name);
      int bad = 0;
      double worst = 0.0;
      for (size_t i = 0; i < a.size(); ++i) {
        const double tol =
            bound != bounds.end() ? bound->second[i] : 1e-6 + 1e-5 * std::fabs(static_cast<double>(b[i]));
        const double err = std::fabs(static_cast<double>(a[i]) - b[i]);
        worst = std::max(worst, err / tol);
        if (!(err <= tol) && bad++ < 5)
          ADD_FAILURE() << row().name << " [" << s.label << "] " << name << "[" << i << "]: fast " << a[i] << " twin "
                        << b[i] << " (|diff| " << err << " > tol " << tol << ")";
      }
      RecordProperty(std::string(s.label) + "." + name + ".worst_err_over_tol", std::to_string(worst));
    }
  }
}

// Central differences of L = Σ out·R, perturbing each input element by ±h (the actual fp32 step
// x± − x is used as the divisor). Error sources, for a twin that rounds each output once to fp32:
//  rounding: |ΔL| ≤ 2^-24·Σ|out·R| per evaluation, so ≤ 2^-24·Σ|out·R|/h after dividing by 2h;
//  truncation: h²/6·|∂³L/∂x³|, with third derivatives O(1) for these inputs: ≤ 1e-4·(1 + |g|)
//  at h = 2^-6 (h²/6 = 4e-5, the factor ≤ 2.5 covers the softmax/silu curvature of O(1) inputs).
// The tolerance is 4× the rounding bound plus that truncation budget. A wrong formula (missing term,
// sign, factor, transposed index) gives errors of O(|g|), far above it.
double fd_tolerance(double g, double abs_loss, double h) {
  return 4.0 * abs_loss * 0x1p-24 / h + 1e-4 * (1.0 + std::fabs(g));
}

TEST_P(KernelTable, TwinGradientsMatchFiniteDifferences) {
  const Sizes& s = kSmall;
  const double h = 0x1p-6;
  Case c = row().make(s);
  run_fresh(row(), Impl::kReference, s, c);
  const double abs_loss = abs_loss_of(c);
  std::map<std::string, std::vector<float>> grads;
  for (const std::string& in : c.inputs) grads[in] = c["d" + in];
  for (const std::string& in : c.inputs) {
    std::vector<float>& x = c[in];
    int bad = 0;
    double worst = 0.0;
    for (size_t j = 0; j < x.size(); ++j) {
      const float x0 = x[j];
      const float xp = x0 + static_cast<float>(h);
      const float xm = x0 - static_cast<float>(h);
      x[j] = xp;
      run_fresh(row(), Impl::kReference, s, c);
      const double lp = loss_of(c);
      x[j] = xm;
      run_fresh(row(), Impl::kReference, s, c);
      const double lm = loss_of(c);
      x[j] = x0;
      const double fd = (lp - lm) / (static_cast<double>(xp) - static_cast<double>(xm));
      const double g = grads[in][j];
      const double tol = fd_tolerance(g, abs_loss, h);
      worst = std::max(worst, std::fabs(fd - g) / tol);
      if (!(std::fabs(fd - g) <= tol) && bad++ < 5)
        ADD_FAILURE() << row().name << ": d" << in << "[" << j << "] analytic " << g << " finite difference " << fd
                      << " (|diff| " << std::fabs(fd - g) << " > tol " << tol << ")";
    }
    RecordProperty("d" + in + ".worst_err_over_tol", std::to_string(worst));
  }
}

TEST_P(KernelTable, FastKernelIsDeterministic) {
  const Sizes& s = kMedium;
  Case a = row().make(s);
  Case b = a;
  run_fresh(row(), Impl::kFast, s, a);
  run_fresh(row(), Impl::kFast, s, b);
  for (const std::string& name : compared_buffers(a)) {
    ASSERT_EQ(a[name].size(), b[name].size());
    EXPECT_EQ(std::memcmp(a[name].data(), b[name].data(), a[name].size() * sizeof(float)), 0)
        << row().name << ": " << name << " differs between two identical runs";
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, KernelTable, ::testing::Range<size_t>(0, op_table().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return std::string(op_table()[info.param].name);
                         });

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::kernels
