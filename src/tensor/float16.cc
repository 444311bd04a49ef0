// Array conversions between fp32 and the 16-bit formats (float16.h). Each is one plain loop over the
// inline scalar conversion, which is branch-free so that the compiler vectorizes it (AVX2: 8 lanes);
// fp16 uses the F16C instructions instead where the CPU has them (float16_f16c.cc, same results).
// Invariant: element i depends only on element i, so vector width never changes a result.
#include "tensor/float16.h"

#include "core/check.h"
#include "core/time_split.h"

namespace sp {
namespace float16_detail {
void f16_from_f32_f16c(uint16_t* dst, const float* src, int64_t n);
void f32_from_f16_f16c(float* dst, const uint16_t* src, int64_t n);
}  // namespace float16_detail

namespace {
bool cpu_has_f16c() {
  static const bool has = __builtin_cpu_supports("f16c");
  return has;
}
}  // namespace

void float16_from_f32(uint16_t* dst, const float* src, int64_t n, DType t) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  SP_CHECK(is_float16(t), "float16_from_f32: {} is not a 16-bit float dtype", dtype_name(t));
  if (t == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_from_f32(src[i]);
  } else if (cpu_has_f16c()) {
    float16_detail::f16_from_f32_f16c(dst, src, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = f16_from_f32(src[i]);
  }
}

void f32_from_float16(float* dst, const uint16_t* src, int64_t n, DType t) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  SP_CHECK(is_float16(t), "f32_from_float16: {} is not a 16-bit float dtype", dtype_name(t));
  if (t == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_from_bf16(src[i]);
  } else if (cpu_has_f16c()) {
    float16_detail::f32_from_f16_f16c(dst, src, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = f32_from_f16(src[i]);
  }
}

void round_through_float16(float* x, int64_t n, DType t) {
  SP_CHECK(is_float16(t), "round_through_float16: {} is not a 16-bit float dtype", dtype_name(t));
  if (t == DType::kBF16) {
    for (int64_t i = 0; i < n; ++i) x[i] = f32_from_bf16(bf16_from_f32(x[i]));
  } else {
    for (int64_t i = 0; i < n; ++i) x[i] = f32_from_f16(f16_from_f32(x[i]));
  }
}

bool float16_has_nonfinite(const uint16_t* x, int64_t n, DType t) {
  SP_CHECK(is_float16(t), "float16_has_nonfinite: {} is not a 16-bit float dtype", dtype_name(t));
  // All-ones exponent field: 0x7F80 (bf16) or 0x7C00 (fp16) under the sign-less mask.
  const uint16_t exp_mask = t == DType::kBF16 ? 0x7F80 : 0x7C00;
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) any |= (x[i] & exp_mask) == exp_mask;
  return any != 0;
}

}  // namespace sp
