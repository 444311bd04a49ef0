// DeviceRates: what one device measurably achieves, as curves over size, for the time model
// (planner/kernel_costs.h) — the GEMM efficiency per dtype against the FLOPs of one call, the seconds of one
// attention head against the sequence length, and the memory bandwidth each family of memory-bound kernels
// reaches against the bytes one call moves. Written by `plan calibrate` for this host (measured with the
// engine's own kernels, every rank at once as in training); a cluster file may state them (docs/formats/
// cluster.md [device.measured]); absent, the plan falls back to the stated single GEMM efficiency and prices
// nothing but GEMMs — what the published GPU presets do, and say.
// The GEMMs are measured twice: n×n×n products (the dtype's peak and a curve over FLOPs per call, what a
// cluster file without shapes states), and each of a linear layer's three products as the engine calls it
// (GemmForm) over a grid of token rows × weight elements — on a CPU the same FLOPs run at different rates
// by form and shape (oneDNN's bf16 dW with the gradient-accumulating β = 1 at 256 tokens: about 0.6× its
// forward, docs/plan.md §10), so a form's measured grid prices its calls where present; and, with `plan calibrate
// --model`, at the model's own calls (gemm_shapes), which price those calls exactly.
// Interpolation: piecewise linear in (log x, log y) between measured points, constant beyond the ends
// (bilinear in the logs for a grid).
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

// A grid of values z over (x, y), both ascending and > 0; z row-major in x: z[i · y.size() + j].
struct Grid {
  std::vector<double> x, y, z;
  bool empty() const { return z.empty(); }
  double at(double xv, double yv) const;
};

// The three products of a linear layer (kernels/matmul.h linear_forward/backward, linear16.h), for tokens t,
// weight w (OC, IC): forward y = x·wᵀ (t, OC, IC; B transposed, β = 0), dgrad dx = dy·w (t, IC, OC; β = 0),
// wgrad dw += dyᵀ·x (OC, IC, t; A transposed, β = 1: the engine accumulates parameter gradients).
enum class GemmForm { kForward, kDgrad, kWgrad };
inline constexpr GemmForm kGemmForms[] = {GemmForm::kForward, GemmForm::kDgrad, GemmForm::kWgrad};
std::string gemm_form_name(GemmForm f);  // "forward", "dgrad", "wgrad"

// The memory-bound kernel families the engine runs (kernel_costs.h says which call is which). The evidence's
// three (evidence/tensor_summary.h, core/hash.h): `exact_sum` (a TensorSummary's exact sums of fp32 values, the
// gradient norm of every step), `checksum` (the same with the checksum lanes: a checksum record) and `digest`
// (XXH3-128 over bytes: the trace's payload digests, the dp replica check).
enum class MemoryFamily { kNorm, kSwiglu, kRope, kCrossEntropy, kAdd, kAdamw, kCast, kExactSum, kChecksum, kDigest };
inline constexpr MemoryFamily kMemoryFamilies[] = {
    MemoryFamily::kNorm,     MemoryFamily::kSwiglu, MemoryFamily::kRope, MemoryFamily::kCrossEntropy,
    MemoryFamily::kAdd,      MemoryFamily::kAdamw,  MemoryFamily::kCast, MemoryFamily::kExactSum,
    MemoryFamily::kChecksum, MemoryFamily::kDigest};
// "norm", "swiglu", "rope", "cross_entropy", "add", "adamw", "cast", "exact_sum", "checksum", "digest"
std::string memory_family_name(MemoryFamily f);

// One GEMM call as the kernel inventory lists it (kernel_costs.h KernelCall): C (m, n) = A (m, k) · B (k, n) of form
// `form`: forward (tokens, OC, IC), dgrad (tokens, IC, OC), wgrad (OC, IC, tokens).
struct GemmShape {
  GemmForm form = GemmForm::kForward;
  double m = 0, n = 0, k = 0;
  bool operator==(const GemmShape&) const = default;
};

struct DeviceRates {
  std::map<std::string, Curve> gemm_efficiency;  // dtype → fraction of peak_flops[dtype] vs FLOPs per call
  // dtype → form → fraction of peak_flops[dtype] over (token rows, weight elements IC·OC) of one call.
  std::map<std::string, std::map<GemmForm, Grid>> gemm_form_efficiency;
  // A model's own calls (`plan calibrate --model`): the shapes, and per dtype the fraction of its peak each ran at
  // (aligned with gemm_shapes). A call of one of these shapes is priced at its own measurement, not the grid.
  std::vector<GemmShape> gemm_shapes;
  std::map<std::string, std::vector<double>> gemm_shape_efficiency;
  std::map<std::string, std::string>
      gemm_backend;  // dtype → what ran ("openblas-0.3.21/Cooperlake", "onednn-2.6.3/avx512_core_bf16")
  int64_t attention_head_dim = 64;                    // D at which the attention curves were measured
  std::map<std::string, Curve> attention_forward_s;   // dtype → seconds per (sequence, head) vs T
  std::map<std::string, Curve> attention_backward_s;  // dtype → the same for the backward
  std::map<MemoryFamily, Curve> bandwidth;            // bytes/s vs bytes one call moves
  std::vector<std::string> notes;                     // how they were measured (for the report)

  bool empty() const {
    return gemm_efficiency.empty() && gemm_form_efficiency.empty() && gemm_shape_efficiency.empty() &&
           attention_forward_s.empty() && bandwidth.empty();
  }
  nlohmann::json to_json() const;
};

}  // namespace sp::planner
