// Linear layers over a Gemm16 backend (linear16.h): each product is one gemm16 call with the same
// operands, transposes and leading dimensions as the fp32 linear in matmul.cc.
#include "kernels/linear16.h"

#include <algorithm>

#include "core/time_split.h"

namespace sp::kernels {

void linear16_forward(float* y, const uint16_t* x, const uint16_t* w, int64_t N, int64_t IC, int64_t OC, Gemm16& gemm,
                      float* ws) {
  const OwnerTimeScope timed(TimeKind::kGemm);
  // y (N, OC) = x (N, IC) · wᵀ
  gemm.gemm(y, x, w, N, OC, IC, false, true, IC, IC, OC, 1.0f, 0.0f, ws);
}

void linear16_backward(float* dx, float* dw, const uint16_t* dy, const uint16_t* x, const uint16_t* w, int64_t N,
                       int64_t IC, int64_t OC, bool accumulate_dx, Gemm16& gemm, float* ws, bool overwrite_dw) {
  const OwnerTimeScope timed(TimeKind::kGemm);
  // dx (N, IC) = dy (N, OC) · w (OC, IC)
  if (dx != nullptr) gemm.gemm(dx, dy, w, N, IC, OC, false, false, OC, IC, IC, 1.0f, accumulate_dx ? 1.0f : 0.0f, ws);
  // dw (OC, IC) += dyᵀ (OC, N) · x (N, IC), or := where the caller's dw is zero and this is its only writer
  if (dw != nullptr) gemm.gemm(dw, dy, x, OC, IC, N, true, false, OC, IC, IC, 1.0f, overwrite_dw ? 0.0f : 1.0f, ws);
}

int64_t linear16_workspace_floats(Gemm16Kind resolved, int64_t N, int64_t IC, int64_t OC) {
  return std::max({gemm16_workspace_floats(resolved, N, OC, IC), gemm16_workspace_floats(resolved, N, IC, OC),
                   gemm16_workspace_floats(resolved, OC, IC, N)});
}

int64_t linear16_workspace_floats(const Gemm16& gemm, int64_t N, int64_t IC, int64_t OC) {
  return linear16_workspace_floats(gemm.kind(), N, IC, OC);
}

}  // namespace sp::kernels
