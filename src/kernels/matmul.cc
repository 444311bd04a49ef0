// Linear layers via cblas_sgemm or dnnl_sgemm (matmul.h) and the row-major gemm wrapper.
// Not a BLAS: every product is one sgemm call; the wrapper only checks sizes against BLAS's int
// and defines the K = 0 case. Invariant: shapes passed to the backend depend only on the op's sizes.
// Reference: llm.c matmul_forward/backward; docs/kernels.md §linear.
#include "kernels/matmul.h"

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include <atomic>
#include <limits>

#include "core/check.h"
#include "core/time_split.h"
#include "kernels/gemm16.h"

namespace sp::kernels {

namespace {

blasint to_blas_int(int64_t v, const char* what) {
  SP_CHECK(v >= 0 && v <= std::numeric_limits<blasint>::max(), "gemm: {} = {} does not fit a BLAS int", what, v);
  return static_cast<blasint>(v);
}

std::atomic<Gemm32Kind> backend{Gemm32Kind::kOpenBlas};

}  // namespace

void set_gemm32(Gemm32Kind kind) {
  SP_CHECK(kind != Gemm32Kind::kAuto, "set_gemm32: train.gemm32 = \"auto\" must be resolved first (gemm32_auto.h)");
  backend.store(kind);
}
Gemm32Kind current_gemm32() { return backend.load(); }

Result<Gemm32Kind> gemm32_kind_from_name(std::string_view name) {
  if (name == "openblas") return Gemm32Kind::kOpenBlas;
  if (name == "onednn") return Gemm32Kind::kOneDnn;
  if (name == "auto") return Gemm32Kind::kAuto;
  return invalid_argument("\"{}\" is not an fp32 GEMM backend", name)
      .with_hint(
          "use \"auto\" (the faster on this host), \"openblas\" or \"onednn\" (docs/kernels.md §\"The fp32 "
          "GEMM\")");
}

std::string_view gemm32_kind_name(Gemm32Kind kind) {
  switch (kind) {
    case Gemm32Kind::kOpenBlas:
      return "openblas";
    case Gemm32Kind::kOneDnn:
      return "onednn";
    case Gemm32Kind::kAuto:
      return "auto";
  }
  return "?";
}

std::string gemm32_backend_name(Gemm32Kind kind) {
  SP_CHECK(kind != Gemm32Kind::kAuto, "gemm32_backend_name: \"auto\" names no backend until it is resolved");
  if (kind == Gemm32Kind::kOneDnn) return onednn_name();
  // openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64".
  const std::string config = openblas_get_config();
  const size_t v = config.find(' ');
  const std::string version = v == std::string::npos ? "?" : config.substr(v + 1, config.find(' ', v + 1) - v - 1);
  return "openblas-" + version + "/" + openblas_get_corename();
}

void gemm(float* c, const float* a, const float* b, int64_t M, int64_t N, int64_t K, bool trans_a, bool trans_b,
          int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta) {
  gemm_on(backend.load(std::memory_order_relaxed), c, a, b, M, N, K, trans_a, trans_b, lda, ldb, ldc, alpha, beta);
}

void gemm_on(Gemm32Kind kind, float* c, const float* a, const float* b, int64_t M, int64_t N, int64_t K, bool trans_a,
             bool trans_b, int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta) {
  if (M == 0 || N == 0) return;
  SP_CHECK_GE(lda, trans_a ? M : K, "gemm: lda smaller than a row of A");
  SP_CHECK_GE(ldb, trans_b ? K : N, "gemm: ldb smaller than a row of B");
  SP_CHECK_GE(ldc, N, "gemm: ldc smaller than a row of C");
  if (K == 0) {
    // CBLAS would scale C by beta; define it explicitly (beta = 0 overwrites, even NaN).
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  if (kind == Gemm32Kind::kOneDnn) {
    // dnnl_sgemm is row-major, like the wrapper.
    const dnnl_status_t st =
        dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha, a, lda, b, ldb, beta, c, ldc);
    SP_CHECK(st == dnnl_success, "gemm: dnnl_sgemm({}, {}, {}) failed with oneDNN status {}", M, N, K,
             static_cast<int>(st));
    return;
  }
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              to_blas_int(M, "M"), to_blas_int(N, "N"), to_blas_int(K, "K"), alpha, a, to_blas_int(lda, "lda"), b,
              to_blas_int(ldb, "ldb"), beta, c, to_blas_int(ldc, "ldc"));
}

void linear_forward(float* y, const float* x, const float* w, int64_t N, int64_t IC, int64_t OC) {
  const OwnerTimeScope timed(TimeKind::kGemm);
  // y (N, OC) = x (N, IC) · wᵀ
  gemm(y, x, w, N, OC, IC, false, true, IC, IC, OC, 1.0f, 0.0f);
}

void linear_backward(float* dx, float* dw, const float* dy, const float* x, const float* w, int64_t N, int64_t IC,
                     int64_t OC, bool accumulate_dx) {
  const OwnerTimeScope timed(TimeKind::kGemm);
  // dx (N, IC) = dy (N, OC) · w (OC, IC)
  if (dx != nullptr) gemm(dx, dy, w, N, IC, OC, false, false, OC, IC, IC, 1.0f, accumulate_dx ? 1.0f : 0.0f);
  // dw (OC, IC) += dyᵀ (OC, N) · x (N, IC)
  if (dw != nullptr) gemm(dw, dy, x, OC, IC, N, true, false, OC, IC, IC, 1.0f, 1.0f);
}

void set_blas_threads(int threads) {
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);  // oneDNN's (Debian's build threads with OpenMP)
}
int blas_threads() { return openblas_get_num_threads(); }

}  // namespace sp::kernels
