// The GEMM backends' shared check (tests/unit/gemm16_test.cc, gemm32_test.cc): the products every backend
// runs, C's starting values, and the error of a result against the double twin (kernels/reference) in units
// of fp32's accumulation bound, so that one formula judges the 16-bit and the fp32 backends alike.
// Reference: docs/testing.md ("Shared test helpers"), docs/kernels.md §"Tests and tolerances".
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/reference/matmul.h"

namespace sp::test {

// C (M, N) = alpha · op(A) · op(B) + beta · C with `pad` extra floats of row stride on every operand.
struct GemmCase {
  int64_t M, N, K;
  bool ta, tb;
  int64_t pad;
  float alpha, beta;
  int64_t a_rows() const { return ta ? K : M; }
  int64_t a_cols() const { return ta ? M : K; }
  int64_t lda() const { return a_cols() + pad; }
  int64_t b_rows() const { return tb ? N : K; }
  int64_t b_cols() const { return tb ? K : N; }
  int64_t ldb() const { return b_cols() + pad; }
  int64_t ldc() const { return N + pad; }
};

// Every transpose pair at three shapes (beta 0 and 1, alpha 1 and 1/8, dense and strided; the third with
// K = big_k), and a 1×1×1 product.
inline std::vector<GemmCase> gemm_cases(int64_t big_k) {
  std::vector<GemmCase> cases;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      cases.push_back({37, 29, 53, ta, tb, 0, 1.0f, 0.0f});
      cases.push_back({64, 130, 64, ta, tb, 5, 0.125f, 1.0f});
      cases.push_back({130, 70, big_k, ta, tb, 3, 1.0f, 1.0f});
    }
  cases.push_back({1, 1, 1, false, true, 0, 1.0f, 0.0f});
  return cases;
}

// C's values before the product: small multiples of 1/4, exact in every format.
inline std::vector<float> gemm_initial_c(const GemmCase& p) {
  std::vector<float> c(static_cast<size_t>(p.M * p.ldc()));
  for (size_t i = 0; i < c.size(); ++i) c[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  return c;
}

// max over C's entries of |c − exact| / bound, bound = k_terms·u·|alpha|·Σ_k|a·b| + 2u·(|exact| + |beta·c0|)
// with u = 2^-24: K roundings of the accumulation (k_terms = K where each product is exact, as 16-bit inputs'
// are in fp32; K + 1 where the products round too). A result within the bound gives ≤ 1.
inline double gemm_error_ratio(const std::vector<float>& c, const float* a, const float* b,
                               const std::vector<float>& c0, const GemmCase& p, double k_terms) {
  std::vector<float> exact = c0, abs_sum = c0;
  kernels::reference::gemm(exact.data(), a, b, p.M, p.N, p.K, p.ta, p.tb, p.lda(), p.ldb(), p.ldc(), p.alpha, p.beta);
  std::vector<float> aa(a, a + p.a_rows() * p.lda()), bb(b, b + p.b_rows() * p.ldb());
  for (float& v : aa) v = std::fabs(v);
  for (float& v : bb) v = std::fabs(v);
  kernels::reference::gemm(abs_sum.data(), aa.data(), bb.data(), p.M, p.N, p.K, p.ta, p.tb, p.lda(), p.ldb(), p.ldc(),
                           1.0f, 0.0f);
  const double u = 0x1p-24;
  double worst = 0.0;
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.N; ++j) {
      const size_t k = static_cast<size_t>(i * p.ldc() + j);
      const double bound = k_terms * u * std::fabs(p.alpha) * abs_sum[k] +
                           2 * u * (std::fabs(exact[k]) + std::fabs(p.beta * c0[k])) + 1e-30;
      worst = std::max(worst, std::fabs(static_cast<double>(c[k]) - exact[k]) / bound);
    }
  return worst;
}

// Whether C's padding (columns N .. ldc of every row) still holds its starting values.
inline bool gemm_padding_untouched(const std::vector<float>& c, const std::vector<float>& c0, const GemmCase& p) {
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = p.N; j < p.ldc(); ++j)
      if (c[static_cast<size_t>(i * p.ldc() + j)] != c0[static_cast<size_t>(i * p.ldc() + j)]) return false;
  return true;
}

}  // namespace sp::test
