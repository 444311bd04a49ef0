// The two fp32 GEMM backends (matmul.h) timed against each other on this core: what train.gemm32 = "auto" picks
// (gemm32_auto.h caches the pick per host). Not a benchmark: well under a second, once per host and thread count.
// Neither backend wins everywhere (docs/kernels.md §"The fp32 GEMM": oneDNN's sgemm 5–15 % faster than OpenBLAS's
// Cooperlake kernels on an AMD Zen 4, 2.1× its Haswell kernels on a Zen 5, either way by shape on an Intel Emerald
// Rapids), so no rule of CPU flags decides it; a measurement at the engine's own calls does.
// Invariant: the pick is a pure function of the measured times (gemm32_pick), so it is testable on any host.
// Reference: docs/kernels.md §"The fp32 GEMM"; the calls are kernels::linear_forward/linear_backward's.
#pragma once

#include <string>

#include "kernels/matmul.h"

namespace sp::kernels {

struct Gemm32Probe {
  double openblas_s = 0;  // the median over rounds of one round's set of products on OpenBLAS
  double onednn_s = 0;    // the same on oneDNN
  int rounds = 0;
  int threads = 1;
  bool cpu_time = true;  // thread CPU time (one thread), else wall time (the workers are other threads)
};

// oneDNN must be this much faster to be picked: a tie keeps OpenBLAS, the project's BLAS.
inline constexpr double kGemm32Margin = 0.03;

// Times a linear layer's three products (y = x·wᵀ, dx = dy·w, dw += dyᵀ·x) at 512 tokens × a 512² weight and
// 1024 tokens × a 1024² weight on each backend at `threads` threads, the backends alternating round by round
// (so that a change of the machine's load hits both), `rounds` rounds after one warm-up round. Leaves
// the thread count at `threads`.
Gemm32Probe probe_gemm32(int threads, int rounds = 7);

// kOneDnn when oneDNN's time is at least kGemm32Margin below OpenBLAS's, else kOpenBlas.
Gemm32Kind gemm32_pick(const Gemm32Probe& p);

// What the pick depends on, one line: the CPU (vendor, family, model, brand string), OpenBLAS's version and core,
// oneDNN's version and ISA, and the thread count — the key of the host cache (gemm32_auto.h).
std::string gemm32_host_key(int threads);

}  // namespace sp::kernels
