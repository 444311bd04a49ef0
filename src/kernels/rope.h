// Rotary position embedding as Hugging Face LlamaRotaryEmbedding: rotate-half (non-interleaved),
// pair (i, i + D/2) of every head rotated by angle t·theta^(−2i/D). Not the GPT-J interleaved form.
// Accumulation rule: parameter gradients +=, activation gradients =, residual-stream gradients +=.
// rope has no parameters; dx is an activation gradient (=) and may alias dout.
// Elements of a row outside the first n_heads·D values are neither read nor written.
// Reference: Su et al. 2021 (RoFormer) §3.4; HF apply_rotary_pos_emb; twin kernels/reference/rope.h.
#pragma once

#include <cstdint>

namespace sp::kernels {

// cos, sin (T, D/2): angle(t, i) = t · theta^(−2i/D), computed in double, rounded to fp32 once.
void rope_tables(float* cos, float* sin, int64_t T, int64_t D, double theta);

// x: B·T token rows, consecutive rows row_stride floats apart, each starting with n_heads heads of D
// values (e.g. the q and k parts of a fused qkv row: n_heads = H + KV, row_stride = (H + 2KV)·D).
// Token n has position t = n mod T. Per head, with h = D/2 and i < h:
//   out[i] = x[i]·cos[t,i] − x[i+h]·sin[t,i]      out[i+h] = x[i+h]·cos[t,i] + x[i]·sin[t,i]
// out may alias x (in place); out uses the same row_stride.
void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T, int64_t n_heads,
                  int64_t D, int64_t row_stride);

// dx = dout rotated by −angle: dx[i] = dout[i]·c + dout[i+h]·s; dx[i+h] = dout[i+h]·c − dout[i]·s.
// "=" semantics; dx may alias dout.
void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B, int64_t T,
                   int64_t n_heads, int64_t D, int64_t row_stride);

}  // namespace sp::kernels
