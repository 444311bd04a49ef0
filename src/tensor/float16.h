// 16-bit floating-point formats: bfloat16 (sign, 8 exponent, 7 fraction bits: fp32's range) and IEEE
// binary16 "fp16" (sign, 5 exponent, 10 fraction bits). Not arithmetic types: a value is a uint16_t bit
// pattern, every computation widens it to fp32 first (exactly) and narrows the fp32 result once.
// Narrowing rounds to nearest, ties to even, as IEEE 754 and PyTorch do; overflow gives ±inf,
// subnormals are kept (never flushed), NaN stays NaN (sign and the top payload bits kept, quiet bit set).
// Widening is exact (fp16's signaling NaNs come back quiet).
// Invariant: the array functions equal the scalar ones element for element, and both equal the naive
// twin (tensor/reference/float16.h) on all 2^16 patterns and a large sample of fp32 patterns with ties.
// Reference: IEEE 754-2019 §4.3.1, §6.2.3; c10/util/BFloat16.h round_to_nearest_even; docs/kernels.md §16-bit.
#pragma once

#include <bit>
#include <cstdint>

#include "tensor/dtype.h"

namespace sp {

// True for the two 16-bit float dtypes (kBF16, kF16).
inline bool is_float16(DType t) { return t == DType::kBF16 || t == DType::kF16; }

// fp32 → bf16: keep the top 16 bits after adding 0x7FFF + (lowest kept bit), which rounds to nearest
// even and carries into the exponent (so the largest values round to inf). NaN is handled first.
inline uint16_t bf16_from_f32(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded);
}

// bf16 → fp32: exact (the bf16 bits are the top half of the fp32 bits).
inline float f32_from_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// fp32 → fp16. Normal results: rebias the exponent (127 → 15), round the fraction from 23 to 10 bits to
// nearest even (a carry moves into the exponent). |x| ≥ 65520 (max 65504 + half an ulp) → inf. Results
// below 2^-14 are subnormal: adding 0.5f aligns x to units of 2^-24 (the ulp of 0.5f) with the FPU's
// round-to-nearest-even, and the integer difference of the bits is the fp16 fraction (0x400 when it
// rounds up to the smallest normal, which is the right encoding). Branch-free, so loops vectorize.
inline uint16_t f16_from_f32(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7FFFFFFFu;
  const uint32_t biased = a - 0x38000000u;  // exponent 127 → 15 (valid for a ≥ 2^-14)
  const uint32_t normal = (biased + 0x0FFFu + ((biased >> 13) & 1u)) >> 13;
  const float small = std::bit_cast<float>(a < 0x38800000u ? a : 0u) + 0.5f;
  const uint32_t subnormal = std::bit_cast<uint32_t>(small) - 0x3F000000u;
  const uint32_t nan = 0x7E00u | ((a >> 13) & 0x03FFu);
  uint32_t r = a < 0x38800000u ? subnormal : normal;
  r = a >= 0x477FF000u ? 0x7C00u : r;  // 65520 and above, inf
  r = a > 0x7F800000u ? nan : r;
  return static_cast<uint16_t>(sign | r);
}

// fp16 → fp32: exact. Normal: rebias the exponent; subnormal: fraction · 2^-24 (exact in fp32);
// inf/NaN: all-ones exponent, fraction shifted into place, and a NaN quieted (IEEE convertFormat; the
// F16C instruction and PyTorch do the same). bf16 → fp32 above is the plain bit shift instead (a
// signaling NaN stays signaling), as PyTorch's is.
inline float f32_from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  const uint32_t m = h & 0x03FFu;
  const uint32_t normal = ((e + 112u) << 23) | (m << 13);
  const uint32_t special = 0x7F800000u | (m << 13) | (m != 0 ? 0x00400000u : 0u);
  const uint32_t subnormal = std::bit_cast<uint32_t>(static_cast<float>(m) * 0x1p-24f);
  uint32_t r = e == 0 ? subnormal : normal;
  r = e == 31 ? special : r;
  return std::bit_cast<float>(sign | r);
}

// dst[i] = the 16-bit value of src[i] in format `t` (kBF16 or kF16), rounded as above.
void float16_from_f32(uint16_t* dst, const float* src, int64_t n, DType t);
// dst[i] = src[i] (format `t`) widened to fp32, exactly.
void f32_from_float16(float* dst, const uint16_t* src, int64_t n, DType t);
// x[i] = the fp32 value of x[i] rounded to format `t` and widened back (what storing it in `t` keeps).
void round_through_float16(float* x, int64_t n, DType t);
// True iff any element (format `t`) is inf or NaN.
bool float16_has_nonfinite(const uint16_t* x, int64_t n, DType t);

}  // namespace sp
