// Gemm16: a matrix product with 16-bit inputs (bf16 or fp16) and fp32 accumulation and output, behind
// a small interface with one implementation per file:
//   gemm16_onednn.cc    oneDNN (Debian libdnnl 2.6) matmul, used where the CPU multiplies bf16 natively
//                       (AVX512-BF16 or AMX: oneDNN's effective ISA avx512_core_bf16 or above);
//   gemm16_fallback.cc  widen both operands to fp32 (exact) into a workspace, then OpenBLAS sgemm.
// Not a BLAS: row-major only, the caller provides the fallback's workspace (so that the ledger counts it).
// Invariant: for one backend, thread count and shape, the same inputs give the same bits; products
// of 16-bit values are exact in fp32, so backends differ only in summation order (and oneDNN's
// AVX512-BF16 instructions treat bf16 subnormal inputs as zero). The backend's name() goes in the
// run contract. Selection happens at run time (make_gemm16), never at compile time.
// Reference: docs/kernels.md §16-bit GEMM; oneDNN matmul (Developer Guide, "Matrix Multiplication").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "tensor/dtype.h"

namespace sp::kernels {

enum class Gemm16Kind { kAuto, kOneDnn, kFallback };

class Gemm16 {
 public:
  virtual ~Gemm16() = default;
  // Stable identification for the contract, e.g. "onednn-2.6.3/avx512_core_bf16" or "fallback-sgemm".
  virtual const std::string& name() const = 0;
  // The 16-bit format of the inputs (kBF16 or kF16): one backend object serves one format.
  virtual DType dtype() const = 0;
  // Which implementation this is (kOneDnn or kFallback), so that sizes can be computed from the kind alone.
  virtual Gemm16Kind kind() const = 0;
  // Floats of workspace gemm() needs for op(A) (M, K) · op(B) (K, N); 0 if none.
  virtual int64_t workspace_floats(int64_t M, int64_t N, int64_t K) const = 0;
  // C (M, N) fp32 = alpha · op(A) · op(B) + beta · C, row-major, as kernels::gemm (matmul.h): A is (M, K)
  // with row stride lda, or (K, M) if trans_a; B is (K, N) with row stride ldb, or (N, K) if trans_b.
  // A and B hold 16-bit patterns of dtype(). beta = 0 overwrites C. workspace: workspace_floats(M, N, K).
  virtual void gemm(float* c, const uint16_t* a, const uint16_t* b, int64_t M, int64_t N, int64_t K, bool trans_a,
                    bool trans_b, int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta, float* workspace) = 0;
};

// "auto" | "onednn" | "fallback"; anything else is an error naming the value.
Result<Gemm16Kind> gemm16_kind_from_name(std::string_view name);
std::string_view gemm16_kind_name(Gemm16Kind kind);

// What this CPU and library offer, as detected at run time.
struct Gemm16Capability {
  bool onednn_bf16 = false;  // oneDNN creates a native bf16 matmul (effective ISA ≥ avx512_core_bf16)
  bool onednn_f16 = false;   // oneDNN creates an f16 matmul (AVX512-FP16; absent on this project's CPUs)
  std::string onednn_isa;    // oneDNN's effective ISA, e.g. "avx512_core_bf16", "avx2"
};
const Gemm16Capability& gemm16_capability();
// oneDNN's version and effective ISA on this CPU, "onednn-2.6.3/avx512_core_bf16": what decides its bits.
std::string onednn_name();

// Which implementation `kind` resolves to for `dtype` on a CPU with `cap` (a pure function, so the
// choice is testable for CPUs other than this one): auto → onednn where it is native for the dtype,
// else fallback; onednn where it is not → an error naming the dtype and the ISA, with a hint.
Result<Gemm16Kind> gemm16_resolve(Gemm16Kind kind, DType dtype, const Gemm16Capability& cap);

// The backend for `dtype` (kBF16 or kF16), resolved on this CPU.
Result<std::unique_ptr<Gemm16>> make_gemm16(Gemm16Kind kind, DType dtype);

// Workspace floats of a resolved kind for one product: the fallback widens op(A) and op(B), M·K + K·N;
// oneDNN needs none of ours. A pure function of the sizes, for the ledger model.
int64_t gemm16_workspace_floats(Gemm16Kind resolved, int64_t M, int64_t N, int64_t K);

// Per-file factories (gemm16_onednn.cc, gemm16_fallback.cc).
std::unique_ptr<Gemm16> make_gemm16_fallback(DType dtype);
std::unique_ptr<Gemm16> make_gemm16_onednn(DType dtype);
Gemm16Capability onednn_capability();

}  // namespace sp::kernels
