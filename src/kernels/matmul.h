// Linear layers and a strided row-major sgemm wrapper over CBLAS (OpenBLAS) or oneDNN's sgemm (train.gemm32).
// Not a BLAS: no transposed storage, no bias (LLaMA has none), no threading control (the CLI sets
// OpenBLAS threads). Weights are stored (out_features, in_features) as Hugging Face stores Linear.
// Accumulation rule: parameter gradients +=, activation gradients = (dx here: = or += by flag, for
// a tensor that feeds several consumers), residual-stream gradients +=.
// Reference: llm.c matmul_forward/backward; twin in kernels/reference/matmul.h; docs/kernels.md §linear.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace sp::kernels {

// The fp32 GEMM backend every fp32 product runs on (train.gemm32): OpenBLAS's cblas_sgemm or oneDNN's
// dnnl_sgemm, its JIT sgemm; "auto" (the default) is the faster of the two on this host, measured once per host
// (kernels/gemm32_auto.h), since neither wins everywhere (docs/kernels.md §"The fp32 GEMM"). Process-wide like the
// thread count: the Engine sets it from the run configuration before any product. The two differ in summation
// order, so a contract names the one that ran (config.train.gemm32 and engine.gemm32); each is deterministic for
// a given shape and thread count, whatever the operands' alignment.
enum class Gemm32Kind : uint8_t { kOpenBlas, kOneDnn, kAuto };
// kOpenBlas or kOneDnn (SP_CHECK: kAuto is resolved first, gemm32_auto.h).
void set_gemm32(Gemm32Kind kind);
Gemm32Kind current_gemm32();
// "openblas" | "onednn" | "auto"; anything else is an error naming the value.
Result<Gemm32Kind> gemm32_kind_from_name(std::string_view name);
std::string_view gemm32_kind_name(Gemm32Kind kind);
// The contract's engine.gemm32: the library's version and what decides its bits, "openblas-0.3.21/Cooperlake"
// (OpenBLAS's core) or "onednn-2.6.3/avx512_core_bf16" (oneDNN's effective ISA). kAuto: SP_CHECK.
std::string gemm32_backend_name(Gemm32Kind kind);

// C (M, N) = alpha · op(A) · op(B) + beta · C, all row-major. op(A) is (M, K): A is (M, K) with row
// stride lda, or (K, M) if trans_a. op(B) is (K, N): B is (K, N) with row stride ldb, or (N, K) if
// trans_b. beta = 0 overwrites C (NaN/Inf already in C does not leak).
void gemm(float* c, const float* a, const float* b, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
          int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta);
// The same on a named backend (kOpenBlas or kOneDnn), whatever set_gemm32 chose: what the probe compares.
void gemm_on(Gemm32Kind kind, float* c, const float* a, const float* b, int64_t M, int64_t N, int64_t K, bool trans_a,
             bool trans_b, int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta);

// y (N, OC) = x (N, IC) · wᵀ, w (OC, IC).
void linear_forward(float* y, const float* x, const float* w, int64_t N, int64_t IC, int64_t OC);

// dx (N, IC) = dy · w (or += when accumulate_dx); dw (OC, IC) += dyᵀ · x. dx or dw may be nullptr (skipped).
void linear_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t N, int64_t IC,
                     int64_t OC, bool accumulate_dx);

// OpenBLAS's and oneDNN's threads for this process. The bits of a product depend on the thread count, so the
// run configuration pins it (parallel.blas_threads, recorded in the contract) on every rank.
void set_blas_threads(int threads);
int blas_threads();

}  // namespace sp::kernels
