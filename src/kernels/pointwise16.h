// Mixed-precision forms of the per-token kernels whose inputs or outputs are stored in 16 bits:
// rmsnorm forward (16-bit output, the next GEMM's input), swiglu forward/backward (16-bit gate/up in,
// 16-bit output or input gradient out) and the embedding lookup (16-bit table, fp32 residual stream).
// Not new math: each is defined as "widen the 16-bit inputs exactly, run the fp32 kernel's arithmetic
// (rmsnorm.h, swiglu.h, embedding.h), round the 16-bit outputs to nearest even", and equals that
// composition bit for bit (tests/unit/kernels16_test.cc). t is kBF16 or kF16.
// Accumulation rule: parameter gradients +=, activation gradients =, residual-stream gradients +=.
// Reference: docs/kernels.md §"Every cast" (where the model rounds and why).
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace sp::kernels {

// out (N, C) 16-bit = round(x · r · w); rstd (N) fp32 = r as rmsnorm_forward. x (N, C) and w (C) fp32.
void rmsnorm16_forward(uint16_t* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps,
                       DType t);

// out (N, C) 16-bit = round(x · rstd[n] · w): rmsnorm16_forward's output from its saved rstd (rmsnorm_apply).
void rmsnorm16_apply(uint16_t* out, const float* rstd, const float* x, const float* w, int64_t N, int64_t C, DType t);

// gu (N, 2F) 16-bit [gate | up];  out (N, F) 16-bit = round(silu(gate) · up).
void swiglu16_forward(uint16_t* out, const uint16_t* gu, int64_t N, int64_t F, DType t);

// dgu (N, 2F) 16-bit = round([dgate | dup]) of swiglu_backward with dout (N, F) fp32 and gu 16-bit.  ("=")
void swiglu16_backward(uint16_t* dgu, const float* dout, const uint16_t* gu, int64_t N, int64_t F, DType t);

// out (N, C) fp32 = widened table row tok − v_begin for an in-range token, else 0. table (v_count, C) 16-bit.
void embedding16_forward(float* out, const int32_t* tokens, const uint16_t* table, int64_t N, int64_t C,
                         int64_t v_begin, int64_t v_count, DType t);

}  // namespace sp::kernels
