// SwiGLU feed-forward activation as Hugging Face LlamaMLP: h = silu(gate) · up, silu(g) = g·sigmoid(g),
// on the fused gate/up linear output. Not the down projection (that is a linear).
// Accumulation rule: parameter gradients +=, activation gradients =, residual-stream gradients +=.
// dgu is an activation gradient (=). sigmoid uses exp_fast (vec_math.h): deterministic, ≤ 2 ulp exp.
// Reference: Shazeer 2020 (GLU variants); twin kernels/reference/swiglu.h; docs/kernels.md.
#pragma once

#include <cstdint>

namespace sp::kernels {

// gu (N, 2F): per row [gate (F) | up (F)];  out (N, F) = silu(gate) ⊙ up.
void swiglu_forward(float* out, const float* gu, int64_t N, int64_t F);

// dgu (N, 2F) = [dgate | dup] with s = sigmoid(gate):
//   dgate = dout ⊙ up ⊙ s·(1 + gate·(1 − s)),   dup = dout ⊙ gate·s.   ("=")
void swiglu_backward(float* dgu, const float* dout, const float* gu, int64_t N, int64_t F);

}  // namespace sp::kernels
