// Attention forward/backward (attention.h): per (b, h) strided sgemm on the fused qkv rows, softmax
// rows via vec_math. The causal structure is exploited by blocks of kBlock query rows: row block
// [i0, i1) only needs keys [0, i1), and key block [j0, j1) only receives gradient from queries
// [j0, T). Entries above the diagonal inside a block are exact zeros in P and dS, so the products
// are the full masked products; which entries a product skips never depends on anything but T.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/time_split.h"
#include "kernels/matmul.h"
#include "kernels/vec_math.h"

namespace sp::kernels {

namespace {

constexpr int64_t kBlock = 64;

void check_shapes(int64_t T, int64_t H, int64_t KV, int64_t D) {
  SP_CHECK(T > 0 && D > 0, "attention: T = {} and D = {} must be positive", T, D);
  SP_CHECK(KV > 0 && H % KV == 0, "attention: KV = {} must divide H = {} (grouped-query attention)", KV, H);
}

// Row i of the scores (length T) → causal softmax: entries 0..i normalized, i+1..T−1 set to 0.
void softmax_causal_row(float* row, int64_t i, int64_t T) {
  const int64_t len = i + 1;
  const float m = max_of(row, len);
  const double sum = exp_shifted_store(row, row, m, len);
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < len; ++j) row[j] *= inv;
  std::memset(row + len, 0, static_cast<size_t>(T - len) * sizeof(float));
}

// P[i0:i1, :] of one (b, h): S[i0:i1, 0:i1] = scale · q[i0:i1] · k[0:i1]ᵀ, then the causal softmax of each
// row. attention_forward and attention_probs_forward both call it, so recomputed probabilities are the
// forward's bits.
void probs_row_block(float* p, const float* q, const float* k, int64_t i0, int64_t i1, int64_t T, int64_t D, int64_t ld,
                     float scale) {
  gemm(p + i0 * T, q + i0 * ld, k, i1 - i0, i1, D, false, true, ld, ld, T, scale, 0.0f);
  for (int64_t i = i0; i < i1; ++i) softmax_causal_row(p + i * T, i, T);
}

}  // namespace

int64_t attention_scratch_floats(int64_t T) { return T * T; }

void attention_forward(float* out, float* probs, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                       int64_t D) {
  const OwnerTimeScope timed(TimeKind::kAttention);
  check_shapes(T, H, KV, D);
  const int64_t ld = (H + 2 * KV) * D;  // qkv row stride
  const int64_t ldo = H * D;            // out row stride
  const int64_t group = H / KV;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  for (int64_t b = 0; b < B; ++b) {
    const float* rows = qkv + b * T * ld;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      const float* q = rows + h * D;             // (T, D), stride ld
      const float* k = rows + (H + g) * D;       // (T, D), stride ld
      const float* v = rows + (H + KV + g) * D;  // (T, D), stride ld
      float* p = probs + (b * H + h) * T * T;    // (T, T)
      float* o = out + b * T * ldo + h * D;      // (T, D), stride ldo
      for (int64_t i0 = 0; i0 < T; i0 += kBlock) {
        const int64_t i1 = std::min(T, i0 + kBlock);
        probs_row_block(p, q, k, i0, i1, T, D, ld, scale);
        // o[i0:i1] = P[i0:i1, 0:i1] · v[0:i1]
        gemm(o + i0 * ldo, p + i0 * T, v, i1 - i0, D, i1, false, false, T, ld, ldo, 1.0f, 0.0f);
      }
    }
  }
}

void attention_probs_forward(float* probs, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t D) {
  const OwnerTimeScope timed(TimeKind::kAttention);
  check_shapes(T, H, KV, D);
  const int64_t ld = (H + 2 * KV) * D;
  const int64_t group = H / KV;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const float* rows = qkv + b * T * ld;
      float* p = probs + (b * H + h) * T * T;
      for (int64_t i0 = 0; i0 < T; i0 += kBlock)
        probs_row_block(p, rows + h * D, rows + (H + h / group) * D, i0, std::min(T, i0 + kBlock), T, D, ld, scale);
    }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* probs, int64_t B,
                        int64_t T, int64_t H, int64_t KV, int64_t D) {
  const OwnerTimeScope timed(TimeKind::kAttention);
  check_shapes(T, H, KV, D);
  const int64_t ld = (H + 2 * KV) * D;
  const int64_t ldo = H * D;
  const int64_t group = H / KV;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  float* ds = scratch;  // (T, T): dP, then dS in place
  for (int64_t b = 0; b < B; ++b) {
    const float* rows = qkv + b * T * ld;
    float* drows = dqkv + b * T * ld;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      // The first query head of a group overwrites dk/dv, the others add (head order: deterministic).
      const float beta = h % group == 0 ? 0.0f : 1.0f;
      const float* q = rows + h * D;
      const float* k = rows + (H + g) * D;
      const float* v = rows + (H + KV + g) * D;
      float* dq = drows + h * D;
      float* dk = drows + (H + g) * D;
      float* dv = drows + (H + KV + g) * D;
      const float* p = probs + (b * H + h) * T * T;       // (T, T)
      const float* dout_bh = dout + b * T * ldo + h * D;  // (T, D), stride ldo
      for (int64_t i0 = 0; i0 < T; i0 += kBlock) {
        const int64_t i1 = std::min(T, i0 + kBlock);
        // dP[i0:i1, 0:i1] = dout[i0:i1] · v[0:i1]ᵀ
        gemm(ds + i0 * T, dout_bh + i0 * ldo, v, i1 - i0, i1, D, false, true, ldo, ld, T, 1.0f, 0.0f);
        // Softmax backward per row; columns (i, i1) are zeroed because the products below read them.
        for (int64_t i = i0; i < i1; ++i) {
          float* row = ds + i * T;
          const float* prow = p + i * T;
          const float s = static_cast<float>(dot_of(prow, row, i + 1));
          for (int64_t j = 0; j <= i; ++j) row[j] = prow[j] * (row[j] - s);
          std::memset(row + i + 1, 0, static_cast<size_t>(i1 - i - 1) * sizeof(float));
        }
        // dq[i0:i1] = scale · dS[i0:i1, 0:i1] · k[0:i1]
        gemm(dq + i0 * ld, ds + i0 * T, k, i1 - i0, D, i1, false, false, T, ld, ld, scale, 0.0f);
      }
      for (int64_t j0 = 0; j0 < T; j0 += kBlock) {
        const int64_t j1 = std::min(T, j0 + kBlock);
        // dk[j0:j1] (+)= scale · dS[j0:T, j0:j1]ᵀ · q[j0:T]
        gemm(dk + j0 * ld, ds + j0 * T + j0, q + j0 * ld, j1 - j0, D, T - j0, true, false, T, ld, ld, scale, beta);
        // dv[j0:j1] (+)= P[j0:T, j0:j1]ᵀ · dout[j0:T]
        gemm(dv + j0 * ld, p + j0 * T + j0, dout_bh + j0 * ldo, j1 - j0, D, T - j0, true, false, T, ldo, ld, 1.0f,
             beta);
      }
    }
  }
}

}  // namespace sp::kernels
