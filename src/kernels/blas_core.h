// Which OpenBLAS core (kernel family) this process runs, and which one the CPU could run.
// Not a dispatcher: OpenBLAS chooses its core once, when the library loads, from cpuid or from the
// OPENBLAS_CORETYPE environment variable; this file only names the choice and judges it. The CLI acts
// on the judgement before the library matters (cli/blas_select.h re-executes with OPENBLAS_CORETYPE).
// Invariant: a core is only ever upgraded within the ladder below, never replaced by a foreign family
// (an AMD "Zen" core, or one this table does not know, is left as OpenBLAS chose it).
// The core changes fp32 bits (other kernels, other summation blocking): it is named in contract.json
// (engine.blas, openblas_get_config()) and per rank in topology.json (docs/formats/topology.md).
// Reference: OpenBLAS driver/others/dynamic.c (the cores, their CPU requirements); docs/performance.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sp::kernels {

// The x86 vector extensions the ladder needs (cpuid through __builtin_cpu_supports).
struct CpuVectorIsa {
  bool avx = false;
  bool avx2_fma = false;     // AVX2 and FMA3
  bool avx512 = false;       // AVX-512 F, CD, BW, DQ and VL (OpenBLAS's SkylakeX requirement)
  bool avx512_bf16 = false;  // AVX512-BF16 on top of avx512
  bool amx = false;          // AMX tile + bf16 on top of avx512_bf16
};

CpuVectorIsa cpu_vector_isa();

// "avx512_bf16", "avx512", "avx2", "avx" or "none": the best of `isa`, for messages and evidence.
std::string_view isa_name(const CpuVectorIsa& isa);

// openblas_get_corename() of the loaded library ("SkylakeX", "Prescott", "Zen", ...).
std::string blas_core();

// The OPENBLAS_CORETYPE value that gives a faster core than `current` on a CPU with `isa`, or nullopt
// when `current` is already the best this ladder offers, is not an older Intel core of the ladder
// (Prescott, Core2, Penryn, Dunnington, Nehalem, Atom, Sandybridge, Haswell, SkylakeX, Cooperlake), or
// the CPU has nothing better. Ladder: SAPPHIRERAPIDS (amx) > COOPERLAKE (avx512_bf16) > SKYLAKEX
// (avx512) > HASWELL (avx2_fma) > SANDYBRIDGE (avx). Case-insensitive in `current`.
std::optional<std::string> faster_blas_core(std::string_view current, const CpuVectorIsa& isa);

}  // namespace sp::kernels
