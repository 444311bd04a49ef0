// RMSNorm as Hugging Face LlamaRMSNorm: out = x · rsqrt(mean(x²) + eps) · w, per token row.
// The mean of squares and rsqrt are computed in double and rstd is rounded to fp32 once (HF uses
// fp32; double only removes rounding, it never changes the math). Not a LayerNorm: no mean, no bias.
// Accumulation rule: parameter gradients +=, activation gradients =, residual-stream gradients +=.
// Here dx is a residual-stream gradient (+=) and dw a parameter gradient (+=).
// Reference: Zhang & Sennrich 2019; llm.c layernorm_backward; twin kernels/reference/rmsnorm.h.
#pragma once

#include <cstdint>

namespace sp::kernels {

// out (N, C), rstd (N) saved for the backward, x (N, C), w (C).
void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps);

// out (N, C) = (x · rstd[n]) · w, rmsnorm_forward's output from its saved rstd (N): the same per-element
// expression, so the same bits (tests/unit kernels_semantics_test.cc). A backward that recomputes the output
// instead of keeping it (ZB-H1's last stage: docs/memory.md §"ZB-H1").
void rmsnorm_apply(float* out, const float* rstd, const float* x, const float* w, int64_t N, int64_t C);

// With r = rstd[n] and x̂ = x·r:  dx (N, C) += r·(w⊙dout) − (r³/C)·x·Σ_c(w·dout·x);  dw (C) += Σ_n dout⊙x̂.
// dw accumulates rows in order n = 0..N−1.
void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w, const float* rstd,
                      int64_t N, int64_t C);

}  // namespace sp::kernels
