// Timing the two fp32 GEMM backends at the engine's linear products (gemm32_probe.h).
#include "kernels/gemm32_probe.h"

#include <cpuid.h>
#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/blas_core.h"
#include "kernels/gemm16.h"

namespace sp::kernels {

namespace {

double now(bool cpu_time) {
  if (!cpu_time) return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One round on `kind`: the three products of kernels::linear_forward/linear_backward at each (tokens, width).
struct Operands {
  std::vector<float> x, w, y, dx, dw;  // x, y, dx (t, n); w, dw (n, n): the largest shape's
};

double one_round(Gemm32Kind kind, Operands& o, bool cpu_time) {
  constexpr int64_t kShapes[][2] = {{512, 512}, {1024, 1024}};  // (tokens t, width n): x (t, n), w (n, n)
  const double t0 = now(cpu_time);
  for (const auto& [t, n] : kShapes) {
    gemm_on(kind, o.y.data(), o.x.data(), o.w.data(), t, n, n, false, true, n, n, n, 1.0f, 0.0f);    // y = x·wᵀ
    gemm_on(kind, o.dx.data(), o.y.data(), o.w.data(), t, n, n, false, false, n, n, n, 1.0f, 0.0f);  // dx = dy·w
    gemm_on(kind, o.dw.data(), o.y.data(), o.x.data(), n, n, t, true, false, n, n, n, 1.0f, 1.0f);   // dw += dyᵀ·x
  }
  return now(cpu_time) - t0;
}

std::string cpu_identity() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  char vendor[13] = {};
  if (__get_cpuid(0, &a, &b, &c, &d) != 0) {
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
  }
  unsigned family = 0, model = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) != 0) {
    family = (a >> 8) & 0xf;
    model = (a >> 4) & 0xf;
    if (family == 0xf) family += (a >> 20) & 0xff;
    if (family == 0x6 || family >= 0xf) model += ((a >> 16) & 0xf) << 4;
  }
  char brand[49] = {};
  for (unsigned leaf = 0; leaf < 3; ++leaf)
    if (__get_cpuid(0x80000002 + leaf, &a, &b, &c, &d) != 0) {
      std::memcpy(brand + 16 * leaf, &a, 4);
      std::memcpy(brand + 16 * leaf + 4, &b, 4);
      std::memcpy(brand + 16 * leaf + 8, &c, 4);
      std::memcpy(brand + 16 * leaf + 12, &d, 4);
    }
  std::string name(brand);
  name.erase(0, name.find_first_not_of(' '));
  return fmt::format("{} family {} model {} ({})", vendor, family, model, name);
}

}  // namespace

Gemm32Probe probe_gemm32(int threads, int rounds) {
  SP_CHECK(threads >= 1 && rounds >= 1, "probe_gemm32: threads {} and rounds {} must be positive", threads, rounds);
  set_blas_threads(threads);
  constexpr int64_t kMax = 1024 * 1024;
  Operands o{std::vector<float>(kMax), std::vector<float>(kMax), std::vector<float>(kMax, 0.0f),
             std::vector<float>(kMax, 0.0f), std::vector<float>(kMax, 0.0f)};
  for (int64_t i = 0; i < kMax; ++i) {  // finite, varied, no denormals; inputs never overwritten
    o.x[i] = 0.25f + static_cast<float>(i % 13) / 64.0f;
    o.w[i] = (0.5f - static_cast<float>(i % 7) / 64.0f) / 1024.0f;
  }
  Gemm32Probe p;
  p.rounds = rounds;
  p.threads = threads;
  p.cpu_time = threads == 1;
  std::vector<double> ob, od;
  for (int r = 0; r <= rounds; ++r) {  // round 0 warms both up (JIT, page faults) and is not counted
    const bool openblas_first = r % 2 == 0;
    const double a = one_round(openblas_first ? Gemm32Kind::kOpenBlas : Gemm32Kind::kOneDnn, o, p.cpu_time);
    const double b = one_round(openblas_first ? Gemm32Kind::kOneDnn : Gemm32Kind::kOpenBlas, o, p.cpu_time);
    if (r == 0) continue;
    ob.push_back(openblas_first ? a : b);
    od.push_back(openblas_first ? b : a);
  }
  p.openblas_s = median(ob);
  p.onednn_s = median(od);
  return p;
}

Gemm32Kind gemm32_pick(const Gemm32Probe& p) {
  if (p.onednn_s > 0 && p.openblas_s > 0 && p.onednn_s <= (1.0 - kGemm32Margin) * p.openblas_s)
    return Gemm32Kind::kOneDnn;
  return Gemm32Kind::kOpenBlas;
}

std::string gemm32_host_key(int threads) {
  return fmt::format("{}; {}; {}; {} thread{}", cpu_identity(), gemm32_backend_name(Gemm32Kind::kOpenBlas),
                     onednn_name(), threads, threads == 1 ? "" : "s");
}

}  // namespace sp::kernels
