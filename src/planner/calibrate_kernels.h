// Calibration of the time model's compute rates on this host (planner/device_rates.h), with the engine's own
// kernels on this thread: GEMM throughput per dtype over sizes (fp32: kernels::gemm on the backend the caller set,
// train.gemm32 as a run resolves it, its name recorded; bf16 and fp16:
// the engine's Gemm16 backend as a run would resolve it, oneDNN where the CPU multiplies 16-bit natively, its
// name and ISA recorded), one attention head forward and backward over sequence lengths (fp32 and the 16-bit
// kernels), a model's own linear products where asked (the calls its plans price), and the bandwidth of each
// memory-bound kernel family over the bytes one call moves (the byte
// formulas of planner/kernel_costs.h, so the planner divides by the same bytes it multiplied by).
// Statistic: the median of the repetitions (at least `min_seconds` per point, in 3 rounds interleaved over the
// sizes of a curve, so that a change of the machine's load bends no curve), what a step meets on average, not
// the best case. Every rank measures at once, as in training; the caller averages the ranks.
// Not a benchmark suite: a few seconds in all.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "planner/device_rates.h"

namespace sp::planner {

struct KernelCalibrationOptions {
  std::vector<int64_t> gemm_sizes = {32, 64, 128, 256, 512, 1024, 2048};  // n of n×n×n products
  // A linear layer's three products (GemmForm) at token rows × a square weight (n, n): the grid of shapes
  // that prices the engine's calls (device_rates.h).
  std::vector<int64_t> gemm_tokens = {64, 256, 1024, 4096};
  std::vector<int64_t> gemm_widths = {256, 512, 1024, 2048};
  std::vector<int64_t> attention_seq = {64, 128, 256, 512, 1024, 2048};
  int64_t attention_head_dim = 64;
  // Bytes one call moves: activation-sized kernels up to 64 MiB, parameter-sized ones (add, AdamW, casts)
  // up to 1 GiB, where a CPU's caches no longer hold them.
  std::vector<double> activation_bytes = {1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26};
  std::vector<double> parameter_bytes = {1 << 18, 1 << 20, 1 << 22, 1 << 24, 1 << 26, 1 << 28, 1 << 30};
  double min_seconds = 0.05;  // per measured point
  // A model's own GEMM calls (model_gemm_shapes, `plan calibrate --model`), measured per dtype as the engine calls
  // them; empty: none.
  std::vector<GemmShape> model_gemms;
};

// One rank's measurement. gemm_seconds etc. are per point; the rates are derived by the caller after the
// ranks' figures are averaged (calibrate.h).
struct KernelCalibration {
  std::vector<double> gemm_flops;                               // 2n³ per point
  std::map<std::string, std::vector<double>> gemm_flops_per_s;  // dtype → FLOP/s per point
  std::map<std::string, std::string> gemm_backend;              // dtype → what ran
  std::vector<double> gemm_tokens, gemm_weights;                // the grid of the linear products (t, n²)
  // dtype → form → FLOP/s per grid point, tokens-major
  std::map<std::string, std::map<GemmForm, std::vector<double>>> gemm_form_flops_per_s;
  std::vector<GemmShape> gemm_shapes;                                 // KernelCalibrationOptions::model_gemms
  std::map<std::string, std::vector<double>> gemm_shape_flops_per_s;  // dtype → FLOP/s per shape
  std::vector<double> attention_seq;
  int64_t attention_head_dim = 64;
  std::map<std::string, std::vector<double>> attention_forward_s, attention_backward_s;  // dtype → per point
  std::map<MemoryFamily, std::vector<double>> memory_bytes, memory_bytes_per_s;          // family → per point
};

KernelCalibration calibrate_kernels(const KernelCalibrationOptions& o);

// The rates the cluster file records: efficiency = FLOP/s ÷ `peak[dtype]` (the largest rate measured, per
// dtype, over the n×n×n products and the linear products), the rest as measured.
DeviceRates device_rates_of(const KernelCalibration& k, const std::map<std::string, double>& peak);

}  // namespace sp::planner
