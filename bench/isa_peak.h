// The core's arithmetic peak, measured: how many FLOP/s one thread retires when it does nothing but
// independent fused multiply-adds (fp32: vfmadd231ps, 2 FLOPs per lane) or bf16 dot products (vdpbf16ps,
// 2 products and 2 adds per fp32 lane), with enough accumulators to hide the instruction's latency.
// No GEMM, BLAS or oneDNN kernel can exceed it on this core, so PyTorch's step over the model FLOPs at
// this peak bounds the speed-up any engine can show over PyTorch here (docs/performance.md §"The
// hardware ceiling"). AMX tiles are not measured: on an AMX host the 16-bit GEMM peak may exceed the
// vdpbf16ps figure, and the bench takes the larger of the two.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "core/timer.h"

namespace sp::bench {

namespace isa_detail {

constexpr int kChains = 16;  // ≥ latency (4–5 cycles) × FMA ports (2): the ports never wait
// AVX2 has 16 ymm registers: 16 accumulators and the two operands spill, and the FMAs wait on memory (the
// peak read 58 GFLOP/s on a Zen 3 core whose sgemm ran at 85; 8 to 14 chains, unrolled, read 102). 12 chains +
// 2 operands fit and still cover latency × ports (Haswell 5 × 2; Skylake, Zen 3 and Zen 4 4 × 2).
constexpr int kChains256 = 12;
constexpr int64_t kIters = 4000000;  // × 16 chains × 32–64 FLOPs: 2–4 GFLOP, tens of ms per repetition

// One repetition: kIters rounds of kChains independent accumulations; returns a value that depends on all of
// them, so that nothing is optimized away.
__attribute__((target("avx512f"))) inline float fma512_once(float seed) {
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_set1_ps(seed);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < kIters; ++i)
#pragma GCC unroll 32  // the accumulators must live in registers, not in an array in memory
    for (auto& a : acc) a = _mm512_fmadd_ps(a, x, y);
  float sum = 0.0f, lanes[16];
  for (auto& a : acc) {
    _mm512_storeu_ps(lanes, a);
    sum += lanes[0];
  }
  return sum;
}

__attribute__((target("avx2,fma"))) inline float fma256_once(float seed) {
  __m256 acc[kChains256];
  for (auto& a : acc) a = _mm256_set1_ps(seed);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < kIters; ++i)
#pragma GCC unroll 32  // the accumulators must live in registers, not in an array in memory
    for (auto& a : acc) a = _mm256_fmadd_ps(a, x, y);
  float sum = 0.0f;
  for (auto& a : acc) sum += _mm_cvtss_f32(_mm256_castps256_ps128(a));
  return sum;
}

__attribute__((target("avx512f,avx512bf16"))) inline float dpbf16_512_once(float seed) {
  __m512 acc[kChains];
  for (auto& a : acc) a = _mm512_set1_ps(seed);
  const __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.5f), _mm512_set1_ps(0.25f));
  const __m512bh y = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
  for (int64_t i = 0; i < kIters; ++i)
#pragma GCC unroll 32  // the accumulators must live in registers, not in an array in memory
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, x, y);
  float sum = 0.0f, lanes[16];
  for (auto& a : acc) {
    _mm512_storeu_ps(lanes, a);
    sum += lanes[0];
  }
  return sum;
}

// The best of five repetitions, in GFLOP/s.
inline double best_gflops(float (*once)(float), double flops_per_iter) {
  volatile float sink = 0.0f;
  double best = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    Stopwatch w;
    sink = once(sink);
    best = std::max(best, flops_per_iter * static_cast<double>(kIters) / w.seconds() * 1e-9);
  }
  return best;
}

}  // namespace isa_detail

// fp32 FMA peak of this thread in GFLOP/s, on the widest vectors the CPU has (0 without AVX2 + FMA).
inline double fp32_fma_peak_gflops() {
  if (__builtin_cpu_supports("avx512f"))
    return isa_detail::best_gflops(isa_detail::fma512_once, isa_detail::kChains * 16 * 2.0);
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return isa_detail::best_gflops(isa_detail::fma256_once, isa_detail::kChains256 * 8 * 2.0);
  return 0.0;
}

// bf16 dot-product peak (vdpbf16ps on 512-bit vectors) in GFLOP/s; 0 without AVX512-BF16.
inline double bf16_dot_peak_gflops() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16"))
    return isa_detail::best_gflops(isa_detail::dpbf16_512_once, isa_detail::kChains * 16 * 4.0);
  return 0.0;
}

}  // namespace sp::bench
