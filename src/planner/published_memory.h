// Published memory formulas, kept beside the engine's own ledger model as the planner's validation and
// as the selectable "megatron" activation model for shapes the engine cannot train (GPT, 16-bit
// activations). They are the papers' closed forms, not a replay of allocations: the engine's memory per
// category comes from its ledger model (plan/ledger_model.h), never from here.
// ZeRO (Rajbhandari et al., SC'20, arXiv:1910.02054, §5.1–5.3, Table 1), model states per device with
// Ψ parameters, N_d data-parallel ranks, p bytes per parameter, g per gradient and K per parameter of
// optimizer state (mixed-precision Adam: p = g = 2, K = 12):
//   stage 0 (DP)         (p + g + K)·Ψ
//   stage 1 (P_os)       (p + g)·Ψ + K·Ψ/N_d
//   stage 2 (P_os+g)     p·Ψ + (g + K)·Ψ/N_d
//   stage 3 (P_os+g+p)   (p + g + K)·Ψ/N_d
// Activations per transformer layer (Korthikanti et al. 2022, arXiv:2205.05198, Table 2; 16-bit
// activations and 1-byte dropout masks; s sequence, b micro-batch, h hidden, a heads, t tensor-parallel):
//   no parallelism                          s·b·h·(34 + 5·a·s/h)
//   tensor parallel                         s·b·h·(10 + 24/t + 5·a·s/(h·t))
//   tensor + sequence parallel              s·b·h·(34/t + 5·a·s/(h·t))
//   tensor parallel + selective recompute   s·b·h·(10 + 24/t)
//   tensor + sequence + selective           s·b·h·34/t
//   full recompute                          s·b·h·2   (only each layer's input is kept)
#pragma once

#include <cstdint>
#include <string>

#include "model/llama_stage.h"

namespace sp::planner {

struct ZeroPrecision {
  double param_bytes = 2;   // p
  double grad_bytes = 2;    // g
  double optimizer_k = 12;  // K: fp32 master weights, momentum, variance
};
// The engine today: fp32 parameters and gradients, Adam moments only (docs/memory.md): p = g = 4, K = 8.
inline constexpr ZeroPrecision kEngineFp32{4, 4, 8};

// Model-state bytes per device; SP_CHECK on stage outside 0..3 or n_d < 1.
double zero_model_state_bytes(double params, int n_d, int stage, const ZeroPrecision& precision = {});

enum class MegatronActivationCase {
  kNoParallelism,
  kTensorParallel,
  kTensorSequenceParallel,
  kTensorSelective,
  kTensorSequenceSelective,
  kFullRecompute,
};
std::string megatron_activation_case_name(MegatronActivationCase c);
// The Table 2 row for a strategy: tp, whether sequence parallelism is on, and the recompute mode
// (tp = 1 without recompute is "no parallelism").
MegatronActivationCase megatron_activation_case(int tp, bool sequence_parallel, model::Recompute recompute);
// Bytes of activations one transformer layer keeps for one micro-batch.
double megatron_activation_bytes_per_layer(MegatronActivationCase c, int64_t seq_len, int64_t micro_batch,
                                           int64_t hidden, int64_t heads, int tp);

}  // namespace sp::planner
