// 16-bit attention (attention16.h): the loop structure of attention.cc (per (b, h), blocks of 64 query
// rows for the forward and dq, blocks of 64 keys for dk and dv) with Gemm16 products and fp32 softmax.
// Scratch layout (floats): [0, T²) fp32 S or dP rows; then a row block for P·v's fp32 output (≤ 64·D)
// or one widened P row (T); then T² 16-bit entries of dS.
#include "kernels/attention16.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/time_split.h"
#include "kernels/vec_math.h"
#include "tensor/float16.h"

namespace sp::kernels {
namespace {

constexpr int64_t kRows = 64;  // query (or key) rows per block, as attention.cc's kBlock

void check_attention16_shapes(int64_t T, int64_t H, int64_t KV, int64_t D) {
  SP_CHECK(T > 0 && D > 0, "attention16: T = {} and D = {} must be positive", T, D);
  SP_CHECK(KV > 0 && H % KV == 0, "attention16: KV = {} must divide H = {} (grouped-query attention)", KV, H);
}

int64_t row_block_floats(int64_t T, int64_t D) { return std::max(T, std::min(T, kRows) * D); }

// Row i of the fp32 scores (length T) → causal softmax, as attention.cc: entries 0..i normalized, the rest 0.
void softmax_causal_row16(float* row, int64_t i, int64_t T) {
  const int64_t len = i + 1;
  const float m = max_of(row, len);
  const double sum = exp_shifted_store(row, row, m, len);
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < len; ++j) row[j] *= inv;
  std::memset(row + len, 0, static_cast<size_t>(T - len) * sizeof(float));
}

// P[i0:i1, :] of one (b, h): S[0:i1−i0, 0:i1] = scale · q[i0:i1] · k[0:i1]ᵀ in fp32 (into s), the causal
// softmax of each row, rounded once into p. attention16_forward and attention16_probs_forward both call it.
void probs16_row_block(uint16_t* p, float* s, const uint16_t* q, const uint16_t* k, int64_t i0, int64_t i1, int64_t T,
                       int64_t D, int64_t ld, float scale, Gemm16& gemm, float* ws) {
  gemm.gemm(s, q + i0 * ld, k, i1 - i0, i1, D, false, true, ld, ld, T, scale, 0.0f, ws);
  for (int64_t i = i0; i < i1; ++i) {
    float* row = s + (i - i0) * T;
    softmax_causal_row16(row, i, T);
    float16_from_f32(p + i * T, row, T, gemm.dtype());
  }
}

}  // namespace

int64_t attention16_scratch_floats(int64_t T, int64_t D) { return T * T + row_block_floats(T, D) + (T * T + 1) / 2; }

int64_t attention16_workspace_floats(Gemm16Kind resolved, int64_t T, int64_t D) {
  const int64_t m = std::min(T, kRows);
  // S and dP: (m, T, D); P·v and dq: (m, D, T); dk and dv: (m, D, ≤ T).
  return std::max({gemm16_workspace_floats(resolved, m, T, D), gemm16_workspace_floats(resolved, m, D, T)});
}

int64_t attention16_workspace_floats(const Gemm16& g, int64_t T, int64_t D) {
  return attention16_workspace_floats(g.kind(), T, D);
}

void attention16_forward(uint16_t* out, uint16_t* probs, const uint16_t* qkv, int64_t B, int64_t T, int64_t H,
                         int64_t KV, int64_t D, Gemm16& gemm, float* scratch, float* ws) {
  const OwnerTimeScope timed(TimeKind::kAttention);
  check_attention16_shapes(T, H, KV, D);
  const DType t = gemm.dtype();
  const int64_t ld = (H + 2 * KV) * D;  // qkv row stride
  const int64_t ldo = H * D;            // out row stride
  const int64_t group = H / KV;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  float* s = scratch;          // (kRows, T) fp32 scores of a row block
  float* o = scratch + T * T;  // (kRows, D) fp32 output of a row block
  for (int64_t b = 0; b < B; ++b) {
    const uint16_t* rows = qkv + b * T * ld;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      const uint16_t* q = rows + h * D;              // (T, D), stride ld
      const uint16_t* k = rows + (H + g) * D;        // (T, D), stride ld
      const uint16_t* v = rows + (H + KV + g) * D;   // (T, D), stride ld
      uint16_t* p = probs + (b * H + h) * T * T;     // (T, T)
      uint16_t* out_bh = out + b * T * ldo + h * D;  // (T, D), stride ldo
      for (int64_t i0 = 0; i0 < T; i0 += kRows) {
        const int64_t i1 = std::min(T, i0 + kRows);
        probs16_row_block(p, s, q, k, i0, i1, T, D, ld, scale, gemm, ws);
        // o[0:i1−i0] = P[i0:i1, 0:i1] · v[0:i1], then rounded into the output rows
        gemm.gemm(o, p + i0 * T, v, i1 - i0, D, i1, false, false, T, ld, D, 1.0f, 0.0f, ws);
        for (int64_t i = i0; i < i1; ++i) float16_from_f32(out_bh + i * ldo, o + (i - i0) * D, D, t);
      }
    }
  }
}

void attention16_probs_forward(uint16_t* probs, const uint16_t* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                               int64_t D, Gemm16& gemm, float* scratch, float* ws) {
  const OwnerTimeScope timed(TimeKind::kAttention);
  check_attention16_shapes(T, H, KV, D);
  const int64_t ld = (H + 2 * KV) * D;
  const int64_t group = H / KV;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const uint16_t* rows = qkv + b * T * ld;
      uint16_t* p = probs + (b * H + h) * T * T;
      for (int64_t i0 = 0; i0 < T; i0 += kRows)
        probs16_row_block(p, scratch, rows + h * D, rows + (H + h / group) * D, i0, std::min(T, i0 + kRows), T, D, ld,
                          scale, gemm, ws);
    }
}

void attention16_backward(float* dqkv, const uint16_t* dout, const uint16_t* qkv, const uint16_t* probs, int64_t B,
                          int64_t T, int64_t H, int64_t KV, int64_t D, Gemm16& gemm, float* scratch, float* ws) {
  const OwnerTimeScope timed(TimeKind::kAttention);
  check_attention16_shapes(T, H, KV, D);
  const DType t = gemm.dtype();
  const int64_t ld = (H + 2 * KV) * D;
  const int64_t ldo = H * D;
  const int64_t group = H / KV;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  float* dp = scratch;                                                               // (T, T) fp32 dP
  float* prow = scratch + T * T;                                                     // (T) widened P row
  auto* ds = reinterpret_cast<uint16_t*>(scratch + T * T + row_block_floats(T, D));  // (T, T) 16-bit dS
  for (int64_t b = 0; b < B; ++b) {
    const uint16_t* rows = qkv + b * T * ld;
    float* drows = dqkv + b * T * ld;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / group;
      // The first query head of a group overwrites dk/dv, the others add (head order: deterministic).
      const float beta = h % group == 0 ? 0.0f : 1.0f;
      const uint16_t* q = rows + h * D;
      const uint16_t* k = rows + (H + g) * D;
      const uint16_t* v = rows + (H + KV + g) * D;
      float* dq = drows + h * D;
      float* dk = drows + (H + g) * D;
      float* dv = drows + (H + KV + g) * D;
      const uint16_t* p = probs + (b * H + h) * T * T;       // (T, T)
      const uint16_t* dout_bh = dout + b * T * ldo + h * D;  // (T, D), stride ldo
      for (int64_t i0 = 0; i0 < T; i0 += kRows) {
        const int64_t i1 = std::min(T, i0 + kRows);
        // dP[i0:i1, 0:i1] = dout[i0:i1] · v[0:i1]ᵀ
        gemm.gemm(dp + i0 * T, dout_bh + i0 * ldo, v, i1 - i0, i1, D, false, true, ldo, ld, T, 1.0f, 0.0f, ws);
        // Softmax backward per row in fp32, rounded into dS; columns (i, i1) are zeroed (the products read them).
        for (int64_t i = i0; i < i1; ++i) {
          float* row = dp + i * T;
          f32_from_float16(prow, p + i * T, i + 1, t);
          const float sum = static_cast<float>(dot_of(prow, row, i + 1));
          for (int64_t j = 0; j <= i; ++j) row[j] = prow[j] * (row[j] - sum);
          float16_from_f32(ds + i * T, row, i + 1, t);
          std::memset(ds + i * T + i + 1, 0, static_cast<size_t>(i1 - i - 1) * sizeof(uint16_t));
        }
        // dq[i0:i1] = scale · dS[i0:i1, 0:i1] · k[0:i1]
        gemm.gemm(dq + i0 * ld, ds + i0 * T, k, i1 - i0, D, i1, false, false, T, ld, ld, scale, 0.0f, ws);
      }
      for (int64_t j0 = 0; j0 < T; j0 += kRows) {
        const int64_t j1 = std::min(T, j0 + kRows);
        // dk[j0:j1] (+)= scale · dS[j0:T, j0:j1]ᵀ · q[j0:T]
        gemm.gemm(dk + j0 * ld, ds + j0 * T + j0, q + j0 * ld, j1 - j0, D, T - j0, true, false, T, ld, ld, scale, beta,
                  ws);
        // dv[j0:j1] (+)= P[j0:T, j0:j1]ᵀ · dout[j0:T]
        gemm.gemm(dv + j0 * ld, p + j0 * T + j0, dout_bh + j0 * ldo, j1 - j0, D, T - j0, true, false, T, ldo, ld, 1.0f,
                  beta, ws);
      }
    }
  }
}

}  // namespace sp::kernels
