// Linear layers with 16-bit inputs (bf16 or fp16 patterns) and fp32 accumulation and outputs, through
// a Gemm16 backend (gemm16.h). The mixed-precision twin of matmul.h's linear_forward/backward: same
// shapes, same accumulation rule (parameter gradients +=, activation gradients =, or += by flag).
// Not a rounding point: every output is fp32; the caller rounds what it stores (docs/kernels.md §"Every cast").
// Invariant: with the fallback backend, the result equals linear_forward/backward on the widened
// inputs bit for bit (tests/unit/kernels16_test.cc).
// Reference: Micikevicius et al. 2018 (mixed precision training), §3.3; docs/kernels.md §16-bit.
#pragma once

#include <cstdint>

#include "kernels/gemm16.h"

namespace sp::kernels {

// y (N, OC) fp32 = x (N, IC) · wᵀ, w (OC, IC); x and w 16-bit. ws: linear16_workspace_floats floats.
void linear16_forward(float* y, const uint16_t* x, const uint16_t* w, int64_t N, int64_t IC, int64_t OC, Gemm16& gemm,
                      float* ws);

// dx (N, IC) fp32 = dy · w (or += when accumulate_dx); dw (OC, IC) fp32 += dyᵀ · x. dy (N, OC), x and w
// 16-bit. dx or dw may be nullptr (skipped). overwrite_dw: dw := dyᵀ · x (β = 0), for a dw the caller knows
// is zero and the only writer of which this product is (a fresh gradient leaf's block weights,
// GradSink::leaf_is_zero): the same sum without reading dw — oneDNN's β = 1 is a sum post-op that on the AMD
// EPYC ran the product at 0.6–0.65× its β = 0 rate (docs/performance.md) — except that an exact −0 stays −0
// where 0 + (−0) gives +0.
void linear16_backward(float* dx, float* dw, const uint16_t* dy, const uint16_t* x, const uint16_t* w, int64_t N,
                       int64_t IC, int64_t OC, bool accumulate_dx, Gemm16& gemm, float* ws, bool overwrite_dw = false);

// Workspace floats the three products of one linear need on `gemm` (the largest of them).
int64_t linear16_workspace_floats(const Gemm16& gemm, int64_t N, int64_t IC, int64_t OC);
// The same for a resolved backend kind (a pure function of the sizes, for the ledger model).
int64_t linear16_workspace_floats(Gemm16Kind resolved, int64_t N, int64_t IC, int64_t OC);

}  // namespace sp::kernels
