// The fallback 16-bit GEMM (gemm16.h): widen op(A) and op(B) to fp32 in the caller's workspace (exact),
// then one OpenBLAS sgemm through kernels::gemm. Runs on any x86-64 CPU. Not faster than sgemm: its
// cost is sgemm's plus one pass over each operand (M·K + K·N conversions against M·N·K multiply-adds).
// Invariant: the result equals kernels::gemm on the widened operands stored densely, bit for bit
// (tests/unit/gemm16_test.cc), so it inherits sgemm's determinism for a fixed thread count and shape.
#include "core/check.h"
#include "kernels/gemm16.h"
#include "kernels/matmul.h"
#include "tensor/float16.h"

namespace sp::kernels {
namespace {

// Copies rows × cols of a row-major 16-bit matrix with row stride ld into a dense fp32 (rows, cols).
void widen_matrix(float* dst, const uint16_t* src, int64_t rows, int64_t cols, int64_t ld, DType t) {
  for (int64_t r = 0; r < rows; ++r) f32_from_float16(dst + r * cols, src + r * ld, cols, t);
}

class FallbackGemm16 final : public Gemm16 {
 public:
  explicit FallbackGemm16(DType dtype) : dtype_(dtype), name_("fallback-sgemm") {
    SP_CHECK(is_float16(dtype), "fallback 16-bit GEMM for {}", dtype_name(dtype));
  }
  const std::string& name() const override { return name_; }
  DType dtype() const override { return dtype_; }
  Gemm16Kind kind() const override { return Gemm16Kind::kFallback; }
  int64_t workspace_floats(int64_t M, int64_t N, int64_t K) const override {
    return gemm16_workspace_floats(Gemm16Kind::kFallback, M, N, K);
  }

  void gemm(float* c, const uint16_t* a, const uint16_t* b, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
            int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta, float* workspace) override {
    SP_CHECK_GE(lda, trans_a ? M : K, "gemm16: lda smaller than a row of A");
    SP_CHECK_GE(ldb, trans_b ? K : N, "gemm16: ldb smaller than a row of B");
    float* a32 = workspace;          // op(A) as stored: (M, K), or (K, M) if trans_a
    float* b32 = workspace + M * K;  // op(B) as stored: (K, N), or (N, K) if trans_b
    widen_matrix(a32, a, trans_a ? K : M, trans_a ? M : K, lda, dtype_);
    widen_matrix(b32, b, trans_b ? N : K, trans_b ? K : N, ldb, dtype_);
    kernels::gemm(c, a32, b32, M, N, K, trans_a, trans_b, trans_a ? M : K, trans_b ? K : N, ldc, alpha, beta);
  }

 private:
  DType dtype_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Gemm16> make_gemm16_fallback(DType dtype) { return std::make_unique<FallbackGemm16>(dtype); }

}  // namespace sp::kernels
