// Naive causal GQA attention: explicit loops over (b, h, i, j, d) in double, softmax from its
// definition with std::exp. The backward keeps dk/dv in double accumulators over the query heads of
// a group and writes every element of dqkv at the end; the scratch argument is unused.
// Reference: HF LlamaAttention (eager) with repeat_kv; docs/kernels.md §attention.
#include "kernels/reference/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sp::kernels::reference {

int64_t attention_scratch_floats(int64_t T) { return T * T; }

void attention_forward(float* out, float* probs, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                       int64_t D) {
  const int64_t ld = (H + 2 * KV) * D;
  const int64_t group = H / KV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> p(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < T; ++i) {
        const float* q = qkv + (b * T + i) * ld + h * D;
        double m = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          const float* k = qkv + (b * T + j) * ld + (H + g) * D;
          double s = 0.0;
          for (int64_t d = 0; d < D; ++d) s += static_cast<double>(q[d]) * k[d];
          p[static_cast<size_t>(j)] = s * scale;
          m = std::max(m, s * scale);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - m);
          sum += p[static_cast<size_t>(j)];
        }
        float* prow = probs + ((b * H + h) * T + i) * T;
        for (int64_t j = 0; j < T; ++j) prow[j] = j <= i ? static_cast<float>(p[static_cast<size_t>(j)] / sum) : 0.0f;
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int64_t j = 0; j <= i; ++j)
            acc += p[static_cast<size_t>(j)] / sum * qkv[(b * T + j) * ld + (H + KV + g) * D + d];
          out[(b * T + i) * H * D + h * D + d] = static_cast<float>(acc);
        }
      }
    }
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* probs, int64_t B,
                        int64_t T, int64_t H, int64_t KV, int64_t D) {
  (void)scratch;
  const int64_t ld = (H + 2 * KV) * D;
  const int64_t group = H / KV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> dk(static_cast<size_t>(T * KV * D));  // (T, KV, D) for one batch row
  std::vector<double> dv(static_cast<size_t>(T * KV * D));
  std::vector<double> ds(static_cast<size_t>(T));
  auto at = [&](int64_t t, int64_t g, int64_t d) { return static_cast<size_t>((t * KV + g) * D + d); };
  for (int64_t b = 0; b < B; ++b) {
    std::fill(dk.begin(), dk.end(), 0.0);
    std::fill(dv.begin(), dv.end(), 0.0);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      for (int64_t i = 0; i < T; ++i) {
        const float* prow = probs + ((b * H + h) * T + i) * T;
        const float* go = dout + (b * T + i) * H * D + h * D;
        // dP_ij = Σ_d dout_id·v_jd;  dS_ij = P_ij·(dP_ij − Σ_j' P_ij'·dP_ij')
        double row_dot = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          const float* v = qkv + (b * T + j) * ld + (H + KV + g) * D;
          double dp = 0.0;
          for (int64_t d = 0; d < D; ++d) dp += static_cast<double>(go[d]) * v[d];
          ds[static_cast<size_t>(j)] = dp;
          row_dot += prow[j] * dp;
        }
        for (int64_t j = 0; j <= i; ++j) ds[static_cast<size_t>(j)] = prow[j] * (ds[static_cast<size_t>(j)] - row_dot);
        const float* q = qkv + (b * T + i) * ld + h * D;
        for (int64_t d = 0; d < D; ++d) {
          double dq = 0.0;
          for (int64_t j = 0; j <= i; ++j) {
            const double dsj = ds[static_cast<size_t>(j)];
            dq += dsj * scale * qkv[(b * T + j) * ld + (H + g) * D + d];
            dk[at(j, g, d)] += dsj * scale * q[d];
            dv[at(j, g, d)] += static_cast<double>(prow[j]) * go[d];
          }
          dqkv[(b * T + i) * ld + h * D + d] = static_cast<float>(dq);
        }
      }
    }
    for (int64_t t = 0; t < T; ++t)
      for (int64_t g = 0; g < KV; ++g)
        for (int64_t d = 0; d < D; ++d) {
          dqkv[(b * T + t) * ld + (H + g) * D + d] = static_cast<float>(dk[at(t, g, d)]);
          dqkv[(b * T + t) * ld + (H + KV + g) * D + d] = static_cast<float>(dv[at(t, g, d)]);
        }
  }
}

}  // namespace sp::kernels::reference
