// Naive twin of kernels/rope.h (same names, signatures and semantics), in double: the oracle for
// tests, not for training. The tables are built from HF's inverse frequencies 1/theta^(2i/D).
// Reference: HF LlamaRotaryEmbedding, apply_rotary_pos_emb; docs/kernels.md §rope.
#pragma once

#include <cstdint>

namespace sp::kernels::reference {

void rope_tables(float* cos, float* sin, int64_t T, int64_t D, double theta);
void rope_forward(float* out, const float* x, const float* cos, const float* sin, int64_t B, int64_t T, int64_t n_heads,
                  int64_t D, int64_t row_stride);
void rope_backward(float* dx, const float* dout, const float* cos, const float* sin, int64_t B, int64_t T,
                   int64_t n_heads, int64_t D, int64_t row_stride);

}  // namespace sp::kernels::reference
