// DeviceRates: what one device measurably achieves, as curves over size, for the time model
// (planner/kernel_costs.h) — the GEMM efficiency per dtype against the FLOPs of one call, the seconds of one
// attention head against the sequence length, and the memory bandwidth each family of memory-bound kernels
// reaches against the bytes one call moves. Written by `plan calibrate` for this host (measured with the
// engine's own kernels, every rank at once as in training); a cluster file may state them (docs/formats/
// cluster.md [device.measured]); absent, the plan falls back to the stated single GEMM efficiency and prices
// nothing but GEMMs — what the published GPU presets do, and say.
// Interpolation: piecewise linear in (log x, log y) between measured points, constant beyond the ends.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sp::planner {

struct Curve {
  std::vector<double> x, y;  // x ascending, both > 0
  bool empty() const { return x.empty(); }
  double at(double v) const;
};

// The memory-bound kernel families the engine runs (kernel_costs.h says which call is which).
enum class MemoryFamily { kNorm, kSwiglu, kRope, kCrossEntropy, kAdd, kAdamw, kCast };
inline constexpr MemoryFamily kMemoryFamilies[] = {
    MemoryFamily::kNorm, MemoryFamily::kSwiglu, MemoryFamily::kRope, MemoryFamily::kCrossEntropy,
    MemoryFamily::kAdd,  MemoryFamily::kAdamw,  MemoryFamily::kCast};
std::string memory_family_name(MemoryFamily f);  // "norm", "swiglu", "rope", "cross_entropy", "add", "adamw", "cast"

struct DeviceRates {
  std::map<std::string, Curve> gemm_efficiency;  // dtype → fraction of peak_flops[dtype] vs FLOPs per call
  std::map<std::string, std::string>
      gemm_backend;                 // dtype → what ran ("openblas sgemm", "onednn-2.6.3/avx512_core_bf16")
  int64_t attention_head_dim = 64;  // D at which the attention curves were measured
  std::map<std::string, Curve> attention_forward_s;   // dtype → seconds per (sequence, head) vs T
  std::map<std::string, Curve> attention_backward_s;  // dtype → the same for the backward
  std::map<MemoryFamily, Curve> bandwidth;            // bytes/s vs bytes one call moves
  std::vector<std::string> notes;                     // how they were measured (for the report)

  bool empty() const { return gemm_efficiency.empty() && attention_forward_s.empty() && bandwidth.empty(); }
  nlohmann::json to_json() const;
};

}  // namespace sp::planner
