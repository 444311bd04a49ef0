// The fp32 GEMM backends (kernels/matmul.h, train.gemm32): OpenBLAS's sgemm and oneDNN's.
//  - names and the error for an unknown one;
//  - each backend for every transpose pair, strided operands, alpha and beta against the naive twin
//    (reference::gemm, double) within fp32's accumulation bound; the padding of C untouched;
//  - each deterministic: the same product twice, and with every operand moved to another alignment, gives
//    the same bits (the bitwise DP/ZeRO/PP equalities rest on it);
//  - beta = 0 overwrites a NaN-filled C; K = 0 scales C by beta (the wrapper's definition, both backends);
//  - the run configuration's train.gemm32 is read ("auto" by default), written only where it names a backend,
//    and refused with the valid names when unknown. The "auto" pick: gemm32_auto_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "config/run_config.h"
#include "core/rng.h"
#include "gemm_check.h"
#include "kernels/matmul.h"
#include "preset_config.h"
#include "unity_id.h"

namespace sp::kernels {
namespace {
namespace SP_TEST_ID {

constexpr Gemm32Kind kBoth[] = {Gemm32Kind::kOpenBlas, Gemm32Kind::kOneDnn};

// Sets the process-wide backend for one scope, and the default back after it.
struct Backend {
  explicit Backend(Gemm32Kind k) {
    set_blas_threads(1);
    set_gemm32(k);
  }
  ~Backend() { set_gemm32(Gemm32Kind::kOpenBlas); }
};

std::vector<float> random_floats(const std::string& name, int64_t n, double scale) {
  const PhiloxKey key = philox_key(32, name);
  std::vector<float> f(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) f[static_cast<size_t>(i)] = static_cast<float>(scale * random_normal(key, i));
  return f;
}

TEST(Gemm32, Names) {
  EXPECT_EQ(*gemm32_kind_from_name("openblas"), Gemm32Kind::kOpenBlas);
  EXPECT_EQ(*gemm32_kind_from_name("onednn"), Gemm32Kind::kOneDnn);
  EXPECT_EQ(*gemm32_kind_from_name("auto"), Gemm32Kind::kAuto);
  EXPECT_EQ(gemm32_kind_name(Gemm32Kind::kOneDnn), "onednn");
  EXPECT_EQ(gemm32_kind_name(Gemm32Kind::kAuto), "auto");
  // engine.gemm32 names the library and what decides its bits (OpenBLAS's core, oneDNN's ISA).
  EXPECT_EQ(gemm32_backend_name(Gemm32Kind::kOpenBlas).rfind("openblas-0.", 0), 0u);
  EXPECT_NE(gemm32_backend_name(Gemm32Kind::kOpenBlas).find('/'), std::string::npos);
  EXPECT_EQ(gemm32_backend_name(Gemm32Kind::kOneDnn).rfind("onednn-", 0), 0u);
  const auto bad = gemm32_kind_from_name("mkl");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().exit_code(), 2);
  EXPECT_NE(bad.status().message().find("mkl"), std::string::npos);
  EXPECT_NE(bad.status().hint().find("onednn"), std::string::npos);
}

TEST(Gemm32, EveryBackendAgainstTwinAndDeterministic) {
  for (Gemm32Kind kind : kBoth) {
    const Backend backend(kind);
    const std::string label(gemm32_kind_name(kind));
    for (const test::GemmCase& p : test::gemm_cases(300)) {
      const int64_t lda = p.lda(), ldb = p.ldb(), ldc = p.ldc();
      const auto a = random_floats("a", p.a_rows() * lda, 1.0);
      const auto b = random_floats("b", p.b_rows() * ldb, 1.0 / std::sqrt(static_cast<double>(p.K)));
      const std::vector<float> c0 = test::gemm_initial_c(p);
      std::vector<float> c1 = c0;
      gemm(c1.data(), a.data(), b.data(), p.M, p.N, p.K, p.ta, p.tb, lda, ldb, ldc, p.alpha, p.beta);
      // The same product with every operand at another alignment (offsets of 1, 3 and 5 floats): the same bits.
      std::vector<float> a2(a.size() + 1), b2(b.size() + 3), c2(c0.size() + 5);
      std::memcpy(a2.data() + 1, a.data(), a.size() * sizeof(float));
      std::memcpy(b2.data() + 3, b.data(), b.size() * sizeof(float));
      std::memcpy(c2.data() + 5, c0.data(), c0.size() * sizeof(float));
      gemm(c2.data() + 5, a2.data() + 1, b2.data() + 3, p.M, p.N, p.K, p.ta, p.tb, lda, ldb, ldc, p.alpha, p.beta);
      EXPECT_EQ(std::memcmp(c1.data(), c2.data() + 5, c1.size() * sizeof(float)), 0)
          << label << " depends on the operands' alignment, M" << p.M << " N" << p.N << " K" << p.K;
      // fp32 inputs: each product rounds too, K + 1 roundings.
      EXPECT_LE(test::gemm_error_ratio(c1, a.data(), b.data(), c0, p, static_cast<double>(p.K + 1)), 1.0)
          << label << " M" << p.M << " N" << p.N << " K" << p.K << " ta" << p.ta << " tb" << p.tb;
      ASSERT_TRUE(test::gemm_padding_untouched(c1, c0, p)) << label << ": C's padding was written";
    }
  }
}

TEST(Gemm32, BetaZeroOverwritesNaNAndKZeroScales) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto a = random_floats("a", 16 * 24, 1.0), b = random_floats("b", 24 * 8, 1.0);
  for (Gemm32Kind kind : kBoth) {
    const Backend backend(kind);
    std::vector<float> c(16 * 8, nan);
    gemm(c.data(), a.data(), b.data(), 16, 8, 24, false, false, 24, 8, 8, 1.0f, 0.0f);
    for (float v : c) ASSERT_FALSE(std::isnan(v)) << gemm32_kind_name(kind) << ": beta = 0 must overwrite NaN";
    std::vector<float> k0(16 * 8, 2.0f);
    gemm(k0.data(), a.data(), b.data(), 16, 8, 0, false, false, 24, 8, 8, 1.0f, 0.5f);
    for (float v : k0) ASSERT_EQ(v, 1.0f) << gemm32_kind_name(kind);
  }
}

TEST(Gemm32, RunConfigKey) {
  auto base = sp::test::preset_config("tiny", {});
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  EXPECT_EQ(base->train.gemm32, Gemm32Kind::kAuto) << "the default is the host's faster backend";
  EXPECT_FALSE(base->to_json()["train"].contains("gemm32")) << "\"auto\" is written by leaving the key out";
  auto openblas = sp::test::preset_config("tiny", {"train.gemm32=openblas"});
  ASSERT_TRUE(openblas.ok()) << openblas.status().to_string();
  EXPECT_EQ(openblas->to_json()["train"]["gemm32"], "openblas") << "a pin survives a round trip (prove's stages)";
  auto onednn = sp::test::preset_config("tiny", {"train.gemm32=onednn"});
  ASSERT_TRUE(onednn.ok()) << onednn.status().to_string();
  EXPECT_EQ(onednn->train.gemm32, Gemm32Kind::kOneDnn);
  EXPECT_EQ(onednn->to_json()["train"]["gemm32"], "onednn");
  const auto bad = sp::test::preset_config("tiny", {"train.gemm32=cublas"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("train.gemm32 = \"cublas\""), std::string::npos) << bad.status().to_string();
  EXPECT_NE(bad.status().hint().find("\"openblas\" or \"onednn\""), std::string::npos) << bad.status().to_string();
  EXPECT_NE(bad.status().hint().find("\"auto\""), std::string::npos) << bad.status().to_string();
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::kernels
