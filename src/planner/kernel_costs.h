// Kernel costs: the kernels one training step runs on one rank, and what they cost on a device — the time
// model's compute side (docs/plan.md §4). The calls are the engine's (model/llama_stage.cc, llama_stage16.cc,
// parallel/grad_store.h, optim/): the projections' GEMMs (forward, and the backward's dX and dW), attention
// per (sequence, head), and the memory-bound kernels (norms, SwiGLU, RoPE, cross-entropy, residual adds,
// the gradient tree's zeroing and sums, 16-bit casts, AdamW), each with the bytes it moves, derived from the
// tensor sizes the ledger model uses (plan/block_shapes.h). The byte formulas below are also what
// `plan calibrate` divides by to turn a kernel's measured time into a bandwidth, so a formula's error cancels.
// Not a profiler and not exact: a kernel's time is priced from curves measured on the device
// (planner/device_rates.h), interpolated at the call's size.
// Pricing without measured rates (a datasheet preset): GEMMs and attention (its causal half, as FLOPs) at the
// stated fraction of the peak; memory-bound kernels free — docs/plan.md says so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/llama_config.h"
#include "model/llama_stage.h"
#include "planner/device_rates.h"

namespace sp::planner {

struct KernelCall {
  enum class Kind { kGemm, kAttentionForward, kAttentionBackward, kMemory };
  Kind kind = Kind::kGemm;
  MemoryFamily family = MemoryFamily::kAdd;  // kMemory
  GemmForm form = GemmForm::kForward;        // kGemm: which of a linear's products (device_rates.h)
  double m = 0, n = 0, k = 0;                // kGemm: C (m, n) = A (m, k) · B (k, n)
  double seq = 0, head_dim = 0;              // attention: one (sequence, head)
  double bytes = 0;                          // kMemory: bytes one call moves
  double count = 1;                          // calls of this size
};

// Bytes one call of each memory-bound kernel moves (read + written), `h` the bytes per element of a 16-bit or
// fp32 activation: rmsnorm forward over (rows, cols) reads x (fp32) and writes out (h) and rstd; ...
double rmsnorm_forward_bytes(double rows, double cols, double h);
double rmsnorm_backward_bytes(double rows, double cols);
double swiglu_forward_bytes(double rows, double f, double h);
double swiglu_backward_bytes(double rows, double f, double h);
double rope_bytes(double rows, double heads, double head_dim);
double cross_entropy_forward_bytes(double rows, double vocab);
double cross_entropy_backward_bytes(double rows, double vocab);
double add_bytes(double n);         // c = a + b, fp32
double zero_bytes(double n);        // memset of n floats
double adamw_bytes(double n);       // p, m, v, g read; p, m, v written (fp32)
double cast_bytes(double n);        // fp32 ↔ 16-bit
double summary_bytes(double n);     // evidence::TensorSummary over n fp32 values (a read)
double digest_bytes(double bytes);  // XXH3-128 over `bytes` (a read)

struct ChunkKernelsInput {
  model::LlamaConfig model;
  int blocks = 0;  // local layers of the chunk
  bool first = false, last = false;
  int64_t micro_batch_size = 1, seq_len = 1;
  int tp = 1;
  // full: one more block forward per block in backward; selective: the attention probabilities again
  // (kernels/attention.h attention_probs_forward), priced as half an attention forward (q·kᵀ, not P·v).
  model::Recompute recompute = model::Recompute::kNone;
  bool mixed = false;         // 16-bit compute (bf16/fp16): 16-bit activations, casts, 16-bit GEMM and attention
  int64_t unit_params = 0;    // parameters of the chunk's units on this rank (the gradient leaves)
  int64_t micro_batches = 1;  // k per step (the gradient tree merges k − 1 times)
};
struct ChunkKernels {
  std::vector<KernelCall> forward, backward;  // one micro-batch
};
ChunkKernels chunk_kernels(const ChunkKernelsInput& in);

// After the pipeline, once per step: the gradient norm (evidence::TensorSummary over the rank's dp range of its
// gradients, `summarized_params`: exact sums, with the checksum lanes on a checksum step, `checksum_share` of
// the steps), the clipping scale and AdamW over the owned parameters, and in mixed precision the 16-bit
// working copies of the rank's parameters.
std::vector<KernelCall> optimizer_kernels(int64_t local_params, int64_t owned_params, int64_t summarized_params,
                                          double checksum_share, bool mixed);

// The evidence of one step on one rank (parallel/engine_step.cc, comm/traced_communicator.cc): the parameter
// checksums over its dp range (`summarized_params`, on a checksum step: `checksum_share` = 1 / checksum_every
// prices the average step), the dp replica check's digest of the parameters it holds (`replica_bytes`, 0
// without replicas) and the trace's digests of every payload it sends and receives (`digested_bytes`,
// comm::digested_bytes_of over the step's traffic; 0 with the trace off).
struct EvidenceKernelsInput {
  int64_t summarized_params = 0;
  double checksum_share = 1;
  double replica_bytes = 0;
  double digested_bytes = 0;
};
std::vector<KernelCall> evidence_kernels(const EvidenceKernelsInput& in);

// The distinct GEMM calls (form, m, n, k) one step of `model` runs on a rank at each tensor-parallel degree of
// `tps` (the chunk_kernels inventory of the whole model on one stage, micro-batches of micro_batch_size ×
// seq_len tokens): what `plan calibrate --model` measures, so that its plans price these calls as measured.
std::vector<GemmShape> model_gemm_shapes(const model::LlamaConfig& model, int64_t micro_batch_size, int64_t seq_len,
                                         const std::vector<int>& tps);

struct KernelTimes {
  double gemm = 0, attention = 0, memory = 0;
  double wgrad = 0;  // the part of `gemm` spent in weight-gradient products (ZB-H1's W pass)
  double total() const { return gemm + attention + memory; }
  KernelTimes& operator+=(const KernelTimes& o);
};
// A GEMM call's token rows and weight elements: (m, n·k) for forward and dgrad, (k, m·n) for wgrad.
double gemm_tokens(const KernelCall& c);
double gemm_weights(const KernelCall& c);

// Prices `calls` at the device's rates for `dtype` (peak FLOP/s `peak`): GEMMs at peak × the efficiency measured
// at exactly their (form, m, n, k) when `rates` has that call (gemm_shapes, plan calibrate --model), else the
// measured efficiency of their form at (token rows, weight elements) when `rates` has that grid for the dtype, else
// at their FLOPs on the dtype's n×n×n curve, else × `stated_efficiency`; attention at
// the measured seconds (scaled by head_dim / the measured head dim) or, without them, as GEMM FLOPs of the
// causal half the engine computes; memory-bound kernels at the measured bandwidth of their family, else free.
KernelTimes price_kernels(const std::vector<KernelCall>& calls, const DeviceRates& rates, const std::string& dtype,
                          double peak, double stated_efficiency);

}  // namespace sp::planner
