// Causal grouped-query attention with 16-bit stored tensors: the mixed-precision twin of attention.h.
// q, k, v (the RoPE'd fused qkv rows), the saved probabilities P and the output are 16-bit; every
// product is a Gemm16 (16-bit inputs, fp32 accumulation); the softmax and its backward run in fp32.
// Rounding points (docs/kernels.md §"Every cast"): P after the fp32 softmax; the output after P·v; dS after
// the fp32 softmax backward (the input of the dq and dk products). dqkv is fp32.
// Not flash attention: P (B, H, T, T) is materialized, as in attention.h, with the same 64-row blocks.
// Accumulation rule: parameter gradients +=, activation gradients =, residual-stream gradients +=.
// dqkv is "=": every element written; dk/dv summed over a group's query heads in head order.
// Reference: attention.h; Micikevicius et al. 2018 §3.3; docs/kernels.md §16-bit.
#pragma once

#include <cstdint>

#include "kernels/gemm16.h"

namespace sp::kernels {

// qkv (B, T, (H + 2KV)·D) 16-bit; out (B, T, H·D) 16-bit = round(P·v); probs (B, H, T, T) 16-bit =
// round(causal softmax(q·kᵀ/sqrt(D))), exact zeros above the diagonal. scratch: attention16_scratch_floats;
// ws: attention16_workspace_floats (the Gemm16 workspace).
void attention16_forward(uint16_t* out, uint16_t* probs, const uint16_t* qkv, int64_t B, int64_t T, int64_t H,
                         int64_t KV, int64_t D, Gemm16& gemm, float* scratch, float* ws);

// probs alone, bit for bit those attention16_forward writes (the same row-block products, softmax and
// rounding): selective recomputation rebuilds P from the saved qkv in backward. scratch and ws as above.
void attention16_probs_forward(uint16_t* probs, const uint16_t* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                               int64_t D, Gemm16& gemm, float* scratch, float* ws);

// dqkv (B, T, (H + 2KV)·D) fp32 = ∂L/∂qkv given dout (B, T, H·D) 16-bit and the forward's qkv and probs:
// dP = dout·vᵀ (fp32), dS = P ⊙ (dP − rowsum(P ⊙ dP)) (fp32, rounded to 16 bits), dq = dS·k/sqrt(D),
// dk = Σ_group dSᵀ·q/sqrt(D), dv = Σ_group Pᵀ·dout.
void attention16_backward(float* dqkv, const uint16_t* dout, const uint16_t* qkv, const uint16_t* probs, int64_t B,
                          int64_t T, int64_t H, int64_t KV, int64_t D, Gemm16& gemm, float* scratch, float* ws);

// Floats of scratch: one (T, T) fp32 matrix, one (T, T) 16-bit matrix, and a row block (fp32).
int64_t attention16_scratch_floats(int64_t T, int64_t D);
// Gemm16 workspace floats for the largest product of either pass.
int64_t attention16_workspace_floats(const Gemm16& gemm, int64_t T, int64_t D);
int64_t attention16_workspace_floats(Gemm16Kind resolved, int64_t T, int64_t D);  // the same, by kind

}  // namespace sp::kernels
