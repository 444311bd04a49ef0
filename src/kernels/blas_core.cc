// The OpenBLAS core ladder (blas_core.h): which core ran, which the CPU supports.
#include "kernels/blas_core.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace sp::kernels {

namespace {

struct Rung {
  const char* corename;  // openblas_get_corename(), lower case
  const char* coretype;  // OPENBLAS_CORETYPE that selects it
  int level;             // 0: no AVX; 1 avx; 2 avx2_fma; 3 avx512; 4 avx512_bf16; 5 amx
};

// OpenBLAS 0.3.21's Intel cores, oldest first. The SSE-only cores all rank 0: any of them on a CPU with
// AVX is the "unknown CPU" fallback (Debian's 0.3.21 on a Xeon newer than it picks Prescott).
constexpr std::array<Rung, 11> kLadder = {{{"prescott", "PRESCOTT", 0},
                                           {"core2", "CORE2", 0},
                                           {"penryn", "PENRYN", 0},
                                           {"dunnington", "DUNNINGTON", 0},
                                           {"nehalem", "NEHALEM", 0},
                                           {"atom", "ATOM", 0},
                                           {"sandybridge", "SANDYBRIDGE", 1},
                                           {"haswell", "HASWELL", 2},
                                           {"skylakex", "SKYLAKEX", 3},
                                           {"cooperlake", "COOPERLAKE", 4},
                                           {"sapphirerapids", "SAPPHIRERAPIDS", 5}}};

int isa_level(const CpuVectorIsa& isa) {
  if (isa.avx512 && isa.avx512_bf16 && isa.amx) return 5;
  if (isa.avx512 && isa.avx512_bf16) return 4;
  if (isa.avx512) return 3;
  if (isa.avx2_fma) return 2;
  return isa.avx ? 1 : 0;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

CpuVectorIsa cpu_vector_isa() {
  __builtin_cpu_init();
  CpuVectorIsa isa;
  isa.avx = __builtin_cpu_supports("avx");
  isa.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  isa.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
  isa.avx512_bf16 = isa.avx512 && __builtin_cpu_supports("avx512bf16");
  isa.amx = isa.avx512_bf16 && __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16");
  return isa;
}

std::string_view isa_name(const CpuVectorIsa& isa) {
  static constexpr std::array<std::string_view, 6> kNames = {"none", "avx", "avx2", "avx512", "avx512_bf16", "amx"};
  return kNames[static_cast<size_t>(isa_level(isa))];
}

std::string blas_core() { return openblas_get_corename(); }

std::optional<std::string> faster_blas_core(std::string_view current, const CpuVectorIsa& isa) {
  const std::string name = lower(current);
  const auto at = std::find_if(kLadder.begin(), kLadder.end(), [&](const Rung& r) { return name == r.corename; });
  if (at == kLadder.end()) return std::nullopt;  // a core of another family, or one newer than this table
  const int want = isa_level(isa);
  if (at->level >= want) return std::nullopt;
  for (const Rung& r : kLadder)
    if (r.level == want) return std::string(r.coretype);
  return std::nullopt;
}

}  // namespace sp::kernels
