// The 16-bit GEMM backends (kernels/gemm16.h):
//  - the selection rule as a pure function, for this CPU and for CPUs without AVX512-BF16 or AVX512-FP16;
//  - every backend this CPU offers, for every transpose pair, strided operands, alpha and beta, against
//    the naive twin (reference::gemm in double on the exactly widened inputs) within fp32's accumulation
//    bound, and twice on the same inputs with identical bits;
//  - the fallback equals kernels::gemm (sgemm) on the widened inputs bit for bit.
// Also registered with ONEDNN_MAX_CPU_ISA=AVX2 (tests/CMakeLists.txt): oneDNN then behaves as on an
// AVX2-only CPU, `auto` must resolve to the fallback, and everything else must still pass.
#include "kernels/gemm16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/rng.h"
#include "gemm_check.h"
#include "kernels/matmul.h"
#include "tensor/float16.h"
#include "unity_id.h"

namespace sp::kernels {
namespace {
namespace SP_TEST_ID {

TEST(Gemm16, ResolutionRule) {
  const Gemm16Capability none;
  Gemm16Capability bf16_only;
  bf16_only.onednn_bf16 = true;
  bf16_only.onednn_isa = "avx512_core_bf16";
  EXPECT_EQ(*gemm16_resolve(Gemm16Kind::kAuto, DType::kBF16, bf16_only), Gemm16Kind::kOneDnn);
  EXPECT_EQ(*gemm16_resolve(Gemm16Kind::kAuto, DType::kBF16, none), Gemm16Kind::kFallback);
  EXPECT_EQ(*gemm16_resolve(Gemm16Kind::kAuto, DType::kF16, bf16_only), Gemm16Kind::kFallback);
  EXPECT_EQ(*gemm16_resolve(Gemm16Kind::kFallback, DType::kBF16, bf16_only), Gemm16Kind::kFallback);
  EXPECT_EQ(*gemm16_resolve(Gemm16Kind::kOneDnn, DType::kBF16, bf16_only), Gemm16Kind::kOneDnn);
  // Asking for oneDNN where it cannot run is an error that says why and what to do.
  const auto no_bf16 = gemm16_resolve(Gemm16Kind::kOneDnn, DType::kBF16, none);
  ASSERT_FALSE(no_bf16.ok());
  EXPECT_EQ(no_bf16.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(no_bf16.status().message().find("BF16"), std::string::npos) << no_bf16.status().to_string();
  EXPECT_NE(no_bf16.status().hint().find("AVX512-BF16"), std::string::npos) << no_bf16.status().to_string();
  const auto no_f16 = gemm16_resolve(Gemm16Kind::kOneDnn, DType::kF16, bf16_only);
  ASSERT_FALSE(no_f16.ok());
  EXPECT_NE(no_f16.status().hint().find("AVX512-FP16"), std::string::npos) << no_f16.status().to_string();
  EXPECT_FALSE(gemm16_resolve(Gemm16Kind::kAuto, DType::kF32, bf16_only).ok());
  // Names.
  EXPECT_EQ(*gemm16_kind_from_name("auto"), Gemm16Kind::kAuto);
  EXPECT_EQ(*gemm16_kind_from_name("onednn"), Gemm16Kind::kOneDnn);
  EXPECT_EQ(*gemm16_kind_from_name("fallback"), Gemm16Kind::kFallback);
  const auto bad = gemm16_kind_from_name("cublas");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().exit_code(), 2);
  EXPECT_NE(bad.status().message().find("cublas"), std::string::npos);
  EXPECT_EQ(gemm16_workspace_floats(Gemm16Kind::kFallback, 3, 5, 7), 3 * 7 + 7 * 5);
  EXPECT_EQ(gemm16_workspace_floats(Gemm16Kind::kOneDnn, 3, 5, 7), 0);
}

TEST(Gemm16, CapabilityOfThisCpu) {
  const Gemm16Capability& cap = gemm16_capability();
  std::printf("oneDNN effective ISA %s: bf16 matmul %s, f16 matmul %s\n", cap.onednn_isa.c_str(),
              cap.onednn_bf16 ? "native" : "no", cap.onednn_f16 ? "yes" : "no");
  const char* capped = std::getenv("ONEDNN_MAX_CPU_ISA");
  if (capped != nullptr && std::string(capped) == "AVX2") {
    EXPECT_FALSE(cap.onednn_bf16) << "oneDNN capped at AVX2 must not offer a native bf16 matmul";
    EXPECT_EQ(cap.onednn_isa, "avx2");
  } else if (__builtin_cpu_supports("avx512bf16")) {
    EXPECT_TRUE(cap.onednn_bf16) << "this CPU has AVX512-BF16 but oneDNN offers no bf16 matmul";
  }
  auto g = make_gemm16(Gemm16Kind::kAuto, DType::kBF16);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ((*g)->name().rfind(cap.onednn_bf16 ? "onednn-" : "fallback-", 0), 0u) << (*g)->name();
  auto f = make_gemm16(Gemm16Kind::kAuto, DType::kF16);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ((*f)->name().rfind(cap.onednn_f16 ? "onednn-" : "fallback-", 0), 0u) << (*f)->name();
}

// Random 16-bit patterns of N(0, scale²) values.
std::vector<uint16_t> random16(const std::string& name, int64_t n, double scale, DType t) {
  const PhiloxKey key = philox_key(16, name);
  std::vector<float> f(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) f[static_cast<size_t>(i)] = static_cast<float>(scale * random_normal(key, i));
  std::vector<uint16_t> h(f.size());
  float16_from_f32(h.data(), f.data(), n, t);
  return h;
}
std::vector<float> widened(const std::vector<uint16_t>& h, DType t) {
  std::vector<float> f(h.size());
  f32_from_float16(f.data(), h.data(), static_cast<int64_t>(h.size()), t);
  return f;
}

// The backends available here, by kind.
std::vector<Gemm16Kind> available(DType t) {
  std::vector<Gemm16Kind> kinds = {Gemm16Kind::kFallback};
  const Gemm16Capability& cap = gemm16_capability();
  if (t == DType::kBF16 ? cap.onednn_bf16 : cap.onednn_f16) kinds.push_back(Gemm16Kind::kOneDnn);
  return kinds;
}

TEST(Gemm16, EveryBackendAgainstTwin) {
  set_blas_threads(1);
  for (DType t : {DType::kBF16, DType::kF16}) {
    for (Gemm16Kind kind : available(t)) {
      auto made = make_gemm16(kind, t);
      ASSERT_TRUE(made.ok()) << made.status().to_string();
      Gemm16& g = **made;
      for (const test::GemmCase& p : test::gemm_cases(256)) {
        const int64_t lda = p.lda(), ldb = p.ldb(), ldc = p.ldc();
        const int64_t a_rows = p.a_rows(), a_cols = p.a_cols(), b_rows = p.b_rows(), b_cols = p.b_cols();
        const auto a = random16("a", a_rows * lda, 1.0, t);
        const auto b = random16("b", b_rows * ldb, 1.0 / std::sqrt(static_cast<double>(p.K)), t);
        const std::vector<float> c0 = test::gemm_initial_c(p);
        std::vector<float> ws(static_cast<size_t>(g.workspace_floats(p.M, p.N, p.K)) + 1);
        std::vector<float> c1 = c0, c2 = c0;
        g.gemm(c1.data(), a.data(), b.data(), p.M, p.N, p.K, p.ta, p.tb, lda, ldb, ldc, p.alpha, p.beta, ws.data());
        g.gemm(c2.data(), a.data(), b.data(), p.M, p.N, p.K, p.ta, p.tb, lda, ldb, ldc, p.alpha, p.beta, ws.data());
        EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)), 0) << g.name() << " not deterministic";
        // The products of 16-bit values are exact in fp32: K roundings of the accumulation.
        const auto a32 = widened(a, t), b32 = widened(b, t);
        EXPECT_LE(test::gemm_error_ratio(c1, a32.data(), b32.data(), c0, p, static_cast<double>(p.K)), 1.0)
            << g.name() << " " << dtype_name(t) << " M" << p.M << " N" << p.N << " K" << p.K << " ta" << p.ta << " tb"
            << p.tb;
        ASSERT_TRUE(test::gemm_padding_untouched(c1, c0, p)) << g.name() << ": C's padding was written";
        if (kind == Gemm16Kind::kFallback) {  // bit for bit the sgemm of the widened, densely stored operands
          std::vector<float> ad(static_cast<size_t>(a_rows * a_cols)), bd(static_cast<size_t>(b_rows * b_cols));
          for (int64_t r = 0; r < a_rows; ++r)
            for (int64_t q = 0; q < a_cols; ++q)
              ad[static_cast<size_t>(r * a_cols + q)] = a32[static_cast<size_t>(r * lda + q)];
          for (int64_t r = 0; r < b_rows; ++r)
            for (int64_t q = 0; q < b_cols; ++q)
              bd[static_cast<size_t>(r * b_cols + q)] = b32[static_cast<size_t>(r * ldb + q)];
          std::vector<float> s = c0;
          kernels::gemm(s.data(), ad.data(), bd.data(), p.M, p.N, p.K, p.ta, p.tb, a_cols, b_cols, ldc, p.alpha,
                        p.beta);
          EXPECT_EQ(std::memcmp(s.data(), c1.data(), s.size() * sizeof(float)), 0) << "fallback differs from sgemm";
        }
      }
    }
  }
}

TEST(Gemm16, EdgeCases) {
  for (Gemm16Kind kind : available(DType::kBF16)) {
    auto g = std::move(make_gemm16(kind, DType::kBF16)).value();
    // K = 0: C scaled by beta; beta = 0 overwrites NaN.
    std::vector<float> c = {std::nanf(""), 2.0f, 3.0f, 4.0f};
    std::vector<uint16_t> none(1);
    std::vector<float> ws(8);
    g->gemm(c.data(), none.data(), none.data(), 2, 2, 0, false, false, 1, 2, 2, 1.0f, 0.0f, ws.data());
    EXPECT_EQ(c, std::vector<float>(4, 0.0f)) << g->name();
    c = {1.0f, 2.0f, 3.0f, 4.0f};
    g->gemm(c.data(), none.data(), none.data(), 2, 2, 0, false, false, 1, 2, 2, 1.0f, 0.5f, ws.data());
    EXPECT_EQ(c, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f})) << g->name();
    // beta = 0 overwrites NaN already in C with K > 0; a closed form: [1 2] · [[3],[4]] = 11.
    std::vector<uint16_t> a = {bf16_from_f32(1.0f), bf16_from_f32(2.0f)},
                          b = {bf16_from_f32(3.0f), bf16_from_f32(4.0f)};
    float y = std::nanf("");
    g->gemm(&y, a.data(), b.data(), 1, 1, 2, false, false, 2, 1, 1, 1.0f, 0.0f, ws.data());
    EXPECT_EQ(y, 11.0f) << g->name();
  }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::kernels
