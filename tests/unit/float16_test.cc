// The 16-bit conversions (tensor/float16.h) against their naive twin (tensor/reference/float16.h):
//  - widening, all 2^16 patterns of both formats, scalar and array, bit for bit;
//  - narrowing, every 4093rd fp32 pattern (≈ 1.05 M, all exponents and both signs) plus every tie
//    (bf16: low half 0x8000; fp16: every normal tie, every subnormal tie) and its two neighbours, the
//    overflow boundary and the fp32 subnormals, scalar and array, bit for bit;
//  - round trip: narrowing a widened non-NaN pattern gives the pattern back;
//  - fp16 also against the compiler's _Float16 conversion (a third, independent implementation).
#include "tensor/float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "tensor/reference/float16.h"
#include "unity_id.h"

namespace sp {
namespace {
namespace SP_TEST_ID {

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// fp32 patterns for narrowing tests: a stride sample plus ties and their neighbours.
std::vector<float> narrowing_inputs() {
  std::vector<uint32_t> u;
  for (uint64_t k = 0; k < (uint64_t{1} << 32); k += 4093) u.push_back(static_cast<uint32_t>(k));
  for (uint32_t hi = 0; hi < 65536; ++hi)  // bf16 ties: exactly halfway between two bf16 values
    for (uint32_t d : {0x7FFFu, 0x8000u, 0x8001u}) u.push_back(hi << 16 | d);
  for (uint32_t s : {0u, 0x80000000u}) {
    for (uint32_t e = 113; e <= 142; ++e)  // fp16 normal ties: low 13 bits 0x1000
      for (uint32_t m = 0; m < 1024; ++m)
        for (uint32_t d : {0x0FFFu, 0x1000u, 0x1001u}) u.push_back(s | e << 23 | m << 13 | d);
    for (uint32_t m = 0; m <= 1024; ++m) {  // fp16 subnormal ties (m + 1/2)·2^-24, and the values
      const float tie = (static_cast<float>(m) + 0.5f) * 0x1p-24f;
      for (int32_t d : {-1, 0, 1}) u.push_back(s | (bits(tie) + static_cast<uint32_t>(d)));
      u.push_back(s | bits(static_cast<float>(m) * 0x1p-24f));
    }
    for (uint32_t a = 0x477FE000u; a <= 0x47800000u; ++a) u.push_back(s | a);  // 65504 … 65536
    for (uint32_t a = 0; a < 0x00800000u; a += 997) u.push_back(s | a);        // fp32 subnormals
    for (uint32_t a : {0x7F7FFFFFu, 0x7F7F8000u, 0x7F7F7FFFu, 0x7F800000u, 0x7F800001u, 0x7FC00000u, 0x7FFFFFFFu})
      u.push_back(s | a);  // near FLT_MAX, inf, NaNs
  }
  std::vector<float> out(u.size());
  for (size_t i = 0; i < u.size(); ++i) out[i] = from_bits(u[i]);
  return out;
}

TEST(Float16, WideningMatchesTwinOnAllPatterns) {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  for (DType t : {DType::kBF16, DType::kF16}) {
    std::vector<float> arr(65536);
    f32_from_float16(arr.data(), all.data(), 65536, t);
    int64_t mismatches = 0;
    for (uint32_t h = 0; h < 65536; ++h) {
      const uint16_t x = static_cast<uint16_t>(h);
      const float fast = t == DType::kBF16 ? f32_from_bf16(x) : f32_from_f16(x);
      const float twin = t == DType::kBF16 ? reference::f32_from_bf16(x) : reference::f32_from_f16(x);
      mismatches += bits(fast) != bits(twin) || bits(arr[h]) != bits(twin);
      if (bits(fast) != bits(twin) && mismatches < 5)
        ADD_FAILURE() << dtype_name(t) << " pattern 0x" << std::hex << h << ": " << bits(fast) << " vs " << bits(twin);
    }
    EXPECT_EQ(mismatches, 0) << dtype_name(t);
  }
}

TEST(Float16, NarrowingMatchesTwinOnSampleAndTies) {
  const std::vector<float> in = narrowing_inputs();
  ASSERT_GT(in.size(), 1'000'000u);
  for (DType t : {DType::kBF16, DType::kF16}) {
    std::vector<uint16_t> arr(in.size());
    float16_from_f32(arr.data(), in.data(), static_cast<int64_t>(in.size()), t);
    int64_t mismatches = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      const uint16_t fast = t == DType::kBF16 ? bf16_from_f32(in[i]) : f16_from_f32(in[i]);
      const uint16_t twin = t == DType::kBF16 ? reference::bf16_from_f32(in[i]) : reference::f16_from_f32(in[i]);
      if (fast != twin || arr[i] != twin) {
        if (++mismatches < 5)
          ADD_FAILURE() << dtype_name(t) << " input 0x" << std::hex << bits(in[i]) << ": scalar " << fast << " array "
                        << arr[i] << " twin " << twin;
      }
    }
    EXPECT_EQ(mismatches, 0) << dtype_name(t) << " over " << in.size() << " inputs";
  }
}

TEST(Float16, RoundTripKeepsEveryNonNanPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    const bool bf16_nan = (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0;
    const bool f16_nan = (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0;
    // A NaN comes back as a quiet NaN of the same sign and payload; everything else unchanged.
    const uint32_t bf16_back = bf16_nan ? (x | 0x40u) : x;
    const uint32_t f16_back = f16_nan ? (x | 0x200u) : x;
    ASSERT_EQ(bf16_from_f32(f32_from_bf16(x)), bf16_back) << "bf16 0x" << std::hex << h;
    ASSERT_EQ(f16_from_f32(f32_from_f16(x)), f16_back) << "fp16 0x" << std::hex << h;
  }
}

TEST(Float16, ClosedFormCases) {
  // Ties to even: 1 + 2^-8 lies halfway between bf16 1 and 1 + 2^-7; 1 + 3·2^-8 rounds up to 1 + 2^-6.
  EXPECT_EQ(bf16_from_f32(1.0f + 0x1p-8f), 0x3F80);
  EXPECT_EQ(bf16_from_f32(1.0f + 3 * 0x1p-8f), 0x3F82);
  EXPECT_EQ(f16_from_f32(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(f16_from_f32(1.0f + 3 * 0x1p-11f), 0x3C02);
  // Overflow: fp16 max 65504; 65519 stays, 65520 is the tie that goes to inf.
  EXPECT_EQ(f16_from_f32(65519.0f), 0x7BFF);
  EXPECT_EQ(f16_from_f32(65520.0f), 0x7C00);
  EXPECT_EQ(f16_from_f32(-1e6f), 0xFC00);
  EXPECT_EQ(bf16_from_f32(std::numeric_limits<float>::max()), 0x7F80);
  // Subnormals: 2^-24 is fp16's smallest; 2^-25 is the tie to 0; 3·2^-25 rounds to 2·2^-24 (even).
  EXPECT_EQ(f16_from_f32(0x1p-24f), 0x0001);
  EXPECT_EQ(f16_from_f32(0x1p-25f), 0x0000);
  EXPECT_EQ(f16_from_f32(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(f16_from_f32(-0x1p-26f), 0x8000);
  EXPECT_EQ(bf16_from_f32(from_bits(0x00000001u)), 0x0000);  // fp32's smallest subnormal → +0 in bf16
  EXPECT_EQ(bf16_from_f32(from_bits(0x00018000u)), 0x0002);  // bf16 subnormal tie → even
  // NaN stays NaN with its sign; inf stays inf.
  EXPECT_TRUE(std::isnan(f32_from_bf16(bf16_from_f32(-std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_from_f32(-std::numeric_limits<float>::quiet_NaN()) >> 15, 1);
  EXPECT_EQ(f16_from_f32(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(f32_from_f16(0x7BFF), 65504.0f);
  EXPECT_EQ(f32_from_f16(0x0001), 0x1p-24f);
  EXPECT_EQ(f32_from_bf16(0x3F80), 1.0f);
}

TEST(Float16, RoundThroughAndNonFiniteScan) {
  std::vector<float> x = {1.0f + 0x1p-12f, 70000.0f, -3.0f, 0x1p-30f};  // below half an fp16 ulp of 1
  std::vector<float> y = x;
  round_through_float16(y.data(), 4, DType::kF16);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_TRUE(std::isinf(y[1]));
  EXPECT_EQ(y[2], -3.0f);
  EXPECT_EQ(y[3], 0.0f);
  std::vector<uint16_t> h(4);
  float16_from_f32(h.data(), x.data(), 4, DType::kF16);
  EXPECT_TRUE(float16_has_nonfinite(h.data(), 4, DType::kF16));
  EXPECT_FALSE(float16_has_nonfinite(h.data() + 2, 2, DType::kF16));
  float16_from_f32(h.data(), x.data(), 4, DType::kBF16);
  EXPECT_FALSE(float16_has_nonfinite(h.data(), 4, DType::kBF16));  // 70000 fits bf16's range
}

#ifdef __FLT16_MAX__
TEST(Float16, Fp16MatchesCompilerFloat16) {
  const std::vector<float> in = narrowing_inputs();
  int64_t mismatches = 0;
  for (float x : in) {
    if (std::isnan(x)) continue;  // _Float16 NaN payloads are the runtime's choice
    const _Float16 h = static_cast<_Float16>(x);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    mismatches += hb != f16_from_f32(x);
  }
  EXPECT_EQ(mismatches, 0);
  for (uint32_t p = 0; p < 65536; ++p) {
    if ((p & 0x7C00u) == 0x7C00u && (p & 0x3FFu) != 0) continue;
    const uint16_t hb = static_cast<uint16_t>(p);
    _Float16 h;
    std::memcpy(&h, &hb, 2);
    ASSERT_EQ(bits(static_cast<float>(h)), bits(f32_from_f16(hb))) << std::hex << p;
  }
}
#endif

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp
