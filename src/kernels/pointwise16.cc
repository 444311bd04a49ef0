// Mixed-precision per-token kernels (pointwise16.h). Each loop repeats the fp32 kernel's expression
// exactly (same operations, same order) on widened inputs and rounds where it stores; the format is a
// template argument so that the inner loops have no branch and vectorize like the fp32 ones.
#include "kernels/pointwise16.h"

#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/time_split.h"
#include "kernels/vec_math.h"
#include "tensor/float16.h"

namespace sp::kernels {
namespace {

template <DType T>
float widen16(uint16_t h) {
  return T == DType::kBF16 ? f32_from_bf16(h) : f32_from_f16(h);
}
template <DType T>
uint16_t narrow16(float x) {
  return T == DType::kBF16 ? bf16_from_f32(x) : f16_from_f32(x);
}

template <DType T>
void rmsnorm16_forward_t(uint16_t* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps) {
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;  // (C)
    uint16_t* o = out + n * C;    // (C)
    const double mean_sq = sum_squares_of(xr, C) / static_cast<double>(C);
    const float r = static_cast<float>(1.0 / std::sqrt(mean_sq + static_cast<double>(eps)));
    rstd[n] = r;
    for (int64_t c = 0; c < C; ++c) o[c] = narrow16<T>((xr[c] * r) * w[c]);
  }
}

template <DType T>
void rmsnorm16_apply_t(uint16_t* out, const float* rstd, const float* x, const float* w, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float* xr = x + n * C;  // (C)
    uint16_t* o = out + n * C;    // (C)
    const float r = rstd[n];
    for (int64_t c = 0; c < C; ++c) o[c] = narrow16<T>((xr[c] * r) * w[c]);  // rmsnorm16_forward_t's
  }
}

template <DType T>
void swiglu16_forward_t(uint16_t* out, const uint16_t* gu, int64_t N, int64_t F) {
  for (int64_t n = 0; n < N; ++n) {
    const uint16_t* gate = gu + n * 2 * F;  // (F)
    const uint16_t* up = gate + F;          // (F)
    uint16_t* o = out + n * F;              // (F)
    for (int64_t f = 0; f < F; ++f) {
      const float g = widen16<T>(gate[f]);
      const float s = 1.0f / (1.0f + exp_fast(-g));
      o[f] = narrow16<T>((g * s) * widen16<T>(up[f]));
    }
  }
}

template <DType T>
void swiglu16_backward_t(uint16_t* dgu, const float* dout, const uint16_t* gu, int64_t N, int64_t F) {
  for (int64_t n = 0; n < N; ++n) {
    const uint16_t* gate = gu + n * 2 * F;  // (F)
    const uint16_t* up = gate + F;          // (F)
    const float* d = dout + n * F;          // (F)
    uint16_t* dgate = dgu + n * 2 * F;      // (F)
    uint16_t* dup = dgate + F;              // (F)
    for (int64_t f = 0; f < F; ++f) {
      const float g = widen16<T>(gate[f]);
      const float s = 1.0f / (1.0f + exp_fast(-g));
      const float dsilu = s * (1.0f + g * (1.0f - s));
      dgate[f] = narrow16<T>((d[f] * widen16<T>(up[f])) * dsilu);
      dup[f] = narrow16<T>(d[f] * (g * s));
    }
  }
}

}  // namespace

void rmsnorm16_forward(uint16_t* out, float* rstd, const float* x, const float* w, int64_t N, int64_t C, float eps,
                       DType t) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  SP_CHECK(is_float16(t), "rmsnorm16_forward: {} is not a 16-bit float dtype", dtype_name(t));
  if (t == DType::kBF16)
    rmsnorm16_forward_t<DType::kBF16>(out, rstd, x, w, N, C, eps);
  else
    rmsnorm16_forward_t<DType::kF16>(out, rstd, x, w, N, C, eps);
}

void rmsnorm16_apply(uint16_t* out, const float* rstd, const float* x, const float* w, int64_t N, int64_t C, DType t) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  SP_CHECK(is_float16(t), "rmsnorm16_apply: {} is not a 16-bit float dtype", dtype_name(t));
  if (t == DType::kBF16)
    rmsnorm16_apply_t<DType::kBF16>(out, rstd, x, w, N, C);
  else
    rmsnorm16_apply_t<DType::kF16>(out, rstd, x, w, N, C);
}

void swiglu16_forward(uint16_t* out, const uint16_t* gu, int64_t N, int64_t F, DType t) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  SP_CHECK(is_float16(t), "swiglu16_forward: {} is not a 16-bit float dtype", dtype_name(t));
  if (t == DType::kBF16)
    swiglu16_forward_t<DType::kBF16>(out, gu, N, F);
  else
    swiglu16_forward_t<DType::kF16>(out, gu, N, F);
}

void swiglu16_backward(uint16_t* dgu, const float* dout, const uint16_t* gu, int64_t N, int64_t F, DType t) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  SP_CHECK(is_float16(t), "swiglu16_backward: {} is not a 16-bit float dtype", dtype_name(t));
  if (t == DType::kBF16)
    swiglu16_backward_t<DType::kBF16>(dgu, dout, gu, N, F);
  else
    swiglu16_backward_t<DType::kF16>(dgu, dout, gu, N, F);
}

void embedding16_forward(float* out, const int32_t* tokens, const uint16_t* table, int64_t N, int64_t C,
                         int64_t v_begin, int64_t v_count, DType t) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = static_cast<int64_t>(tokens[n]) - v_begin;
    float* o = out + n * C;  // (C)
    if (row >= 0 && row < v_count)
      f32_from_float16(o, table + row * C, C, t);
    else
      std::memset(o, 0, sizeof(float) * static_cast<size_t>(C));
  }
}

}  // namespace sp::kernels
