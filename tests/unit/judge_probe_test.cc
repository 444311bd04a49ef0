// The judge's rounding probe (judge/probe.h) on emulated bf16 linears: bf16_round is torch's round-to-nearest-even
// cast; an fp32 sum of the exact bf16 products in any of the orders a GEMM uses (sequential, 8 and 16 lanes,
// pairwise) rounded to bf16 is never called wrong, and its flips stay under the threshold; the same outputs from a
// weight truncated to bf16 (a cast that drops the low bits) are called wrong. The inputs span 16 octaves: products
// of bf16 numbers of one magnitude add exactly in fp32 (their 16 significant bits fit), so without a wide range no
// sum would round and the bound would go unexercised (the test checks that it flips some).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "judge/probe.h"
#include "unity_id.h"

namespace sp::judge {
namespace {
namespace SP_TEST_ID {

float rne_bf16(float x) {  // c10::BFloat16's round to nearest even, on the bits
  uint32_t b = std::bit_cast<uint32_t>(x);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return std::bit_cast<float>(b & 0xFFFF0000u);
}

float truncate_bf16(float x) { return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0xFFFF0000u); }

float sum_in_order(const std::vector<float>& p, int lanes) {
  if (lanes == 0) {  // pairwise
    std::vector<float> v = p;
    while (v.size() > 1) {
      std::vector<float> next;
      for (size_t i = 0; i + 1 < v.size(); i += 2) next.push_back(v[i] + v[i + 1]);
      if (v.size() % 2) next.push_back(v.back());
      v = next;
    }
    return v[0];
  }
  std::vector<float> acc(static_cast<size_t>(lanes), 0.0f);
  for (size_t i = 0; i < p.size(); ++i) acc[i % static_cast<size_t>(lanes)] += p[i];
  float s = 0.0f;
  for (float a : acc) s += a;
  return s;
}

TEST(JudgeProbe, Bf16RoundIsTorchsCast) {
  std::mt19937 gen(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = d(gen);
    EXPECT_EQ(bf16_round(x), static_cast<double>(rne_bf16(x))) << x;
  }
  const float tie = std::bit_cast<float>(0x3F808000u);  // 1 + 2^-8: halfway, to the even 1.0
  EXPECT_EQ(bf16_round(tie), 1.0);
  EXPECT_EQ(bf16_round(-std::bit_cast<float>(0x3F818000u)),
            -static_cast<double>(rne_bf16(std::bit_cast<float>(0x3F818000u))));
}

TEST(JudgeProbe, EveryFp32OrderIsARoundingAndATruncatedWeightIsNot) {
  std::mt19937 gen(11);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::uniform_real_distribution<float> octave(-12.0f, 4.0f);  // a wide range: products whose bits fp32 must round
  for (int64_t K : {64, 256, 768}) {
    ProbeCheck ok, bad;
    for (int row = 0; row < 2048; ++row) {
      std::vector<double> xb(static_cast<size_t>(K)), wb(static_cast<size_t>(K)), wt(static_cast<size_t>(K));
      std::vector<float> p(static_cast<size_t>(K)), pt(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) {
        const float x = d(gen) * std::exp2(octave(gen)), w = d(gen) * 0.05f;
        xb[k] = rne_bf16(x), wb[k] = rne_bf16(w), wt[k] = truncate_bf16(w);
        p[k] = static_cast<float>(xb[k] * wb[k]);  // exact in fp32
        pt[k] = static_cast<float>(xb[k] * wt[k]);
      }
      for (int lanes : {1, 8, 16, 0})
        check_output(xb.data(), wb.data(), K, rne_bf16(sum_in_order(p, lanes)), row, lanes, ok);
      check_output(xb.data(), wb.data(), K, rne_bf16(sum_in_order(pt, 1)), row, 0, bad);
    }
    EXPECT_EQ(ok.wrong, 0) << K << ": " << ok.first_wrong;
    EXPECT_LE(static_cast<double>(ok.flips), flip_threshold(ok.expected)) << K;
    if (K == 768) {
      EXPECT_GT(ok.flips, 0) << "no flip: the bound was never exercised";
    }
    EXPECT_GT(bad.wrong, bad.elements / 4) << K;  // most truncated products round elsewhere
  }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::judge
