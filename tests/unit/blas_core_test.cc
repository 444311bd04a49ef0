// kernels/blas_core.h: the OpenBLAS core ladder. An older Intel core on a CPU that supports a newer one is
// upgraded to the CPU's best rung (Debian's 0.3.21 picks Prescott on an AVX-512 Xeon it does not know); a
// core that is already the best, a foreign family (AMD Zen) or an unknown name is left alone; a CPU
// without AVX gets nothing. Closed cases, plus the one fact of this process: the loaded library names a core.
#include "kernels/blas_core.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "unity_id.h"

namespace sp::kernels {
namespace {
namespace SP_TEST_ID {

constexpr CpuVectorIsa kNoAvx = {};
constexpr CpuVectorIsa kAvx = {.avx = true};
constexpr CpuVectorIsa kAvx2 = {.avx = true, .avx2_fma = true};
constexpr CpuVectorIsa kAvx512 = {.avx = true, .avx2_fma = true, .avx512 = true};
constexpr CpuVectorIsa kBf16 = {.avx = true, .avx2_fma = true, .avx512 = true, .avx512_bf16 = true};
constexpr CpuVectorIsa kAmx = {.avx = true, .avx2_fma = true, .avx512 = true, .avx512_bf16 = true, .amx = true};

TEST(BlasCore, OldIntelCoreIsUpgradedToTheCpusBestRung) {
  EXPECT_EQ(faster_blas_core("Prescott", kAvx512), std::optional<std::string>("SKYLAKEX"));
  EXPECT_EQ(faster_blas_core("Prescott", kBf16), std::optional<std::string>("COOPERLAKE"));
  EXPECT_EQ(faster_blas_core("Prescott", kAmx), std::optional<std::string>("SAPPHIRERAPIDS"));
  EXPECT_EQ(faster_blas_core("Nehalem", kAvx2), std::optional<std::string>("HASWELL"));
  EXPECT_EQ(faster_blas_core("Core2", kAvx), std::optional<std::string>("SANDYBRIDGE"));
  EXPECT_EQ(faster_blas_core("Haswell", kAvx512), std::optional<std::string>("SKYLAKEX"));
  EXPECT_EQ(faster_blas_core("SkylakeX", kAmx), std::optional<std::string>("SAPPHIRERAPIDS"));
  EXPECT_EQ(faster_blas_core("PRESCOTT", kAvx2), std::optional<std::string>("HASWELL"));  // case-insensitive
}

TEST(BlasCore, RightForeignOrUnknownCoreIsLeftAlone) {
  EXPECT_EQ(faster_blas_core("SkylakeX", kAvx512), std::nullopt);
  EXPECT_EQ(faster_blas_core("Cooperlake", kBf16), std::nullopt);
  EXPECT_EQ(faster_blas_core("Cooperlake", kAvx512), std::nullopt);  // never downgraded
  EXPECT_EQ(faster_blas_core("Haswell", kAvx2), std::nullopt);
  EXPECT_EQ(faster_blas_core("Zen", kAvx2), std::nullopt);  // an AVX2-only AMD host: OpenBLAS chose right
  EXPECT_EQ(faster_blas_core("Zen", kAvx512), std::nullopt);
  EXPECT_EQ(faster_blas_core("Excavator", kAvx2), std::nullopt);
  EXPECT_EQ(faster_blas_core("", kAvx512), std::nullopt);
  EXPECT_EQ(faster_blas_core("Prescott", kNoAvx), std::nullopt);  // nothing better to run
}

TEST(BlasCore, IsaNamesTheBestExtension) {
  EXPECT_EQ(isa_name(kNoAvx), "none");
  EXPECT_EQ(isa_name(kAvx2), "avx2");
  EXPECT_EQ(isa_name(kBf16), "avx512_bf16");
  EXPECT_EQ(isa_name({.avx512_bf16 = true}), "none");  // bf16 without the AVX-512 base is not a rung
}

TEST(BlasCore, LoadedLibraryNamesACore) {
  EXPECT_FALSE(blas_core().empty());
  const CpuVectorIsa isa = cpu_vector_isa();
  EXPECT_TRUE(!isa.avx512 || isa.avx2_fma);  // cpuid is consistent with itself
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::kernels
