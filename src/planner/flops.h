// FLOPs of a training step and the utilization figures built on them. Counted are the matrix
// products only (2 FLOPs per multiply-add); norms, activations, softmax, biases, the embedding lookup and
// the optimizer are not, as in the definitions below. It is not a timer: time = FLOPs / (peak · efficiency)
// is the caller's, with the efficiency stated.
//   block forward, one sequence of T tokens:  2·T·P_block + 4·T²·H·D   (P_block = block_matmul_params();
//     4·T²·H·D = QKᵀ and probs·V over the full T×T, not the causal half, as Megatron and PaLM count)
//   head forward:                             2·T·C·V
//   backward = 2 × forward; recompute adds one more forward of each block (full) or QKᵀ again, 2·T²·H·D
//     (selective: the engine rebuilds the probabilities from the saved q and k, model/llama_stage.h; Megatron's
//     checkpointed core attention, Korthikanti et al. 2022 §4.2, also re-runs probs·V: 4·T²·H·D)
// MFU counts model FLOPs = forward + backward only; HFU counts what the hardware executes, recompute
// included (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
// arXiv:2205.05198, §6.2; Chowdhery et al. 2022, PaLM, Appendix B). For Megatron's GPT with full recompute
// the hardware count is exactly Narayanan et al. SC'21 eq. (3): 96·B·s·l·h²·(1 + s/6h + V/16lh).
#pragma once

#include <cstdint>

#include "model/llama_stage.h"
#include "planner/model_shape.h"

namespace sp::planner {

double block_forward_flops(const ModelShape& m, int64_t seq_len);
double attention_core_flops(const ModelShape& m, int64_t seq_len);  // 4·T²·H·D
double head_forward_flops(const ModelShape& m, int64_t seq_len);

struct StepFlops {
  double model = 0;     // forward + backward
  double hardware = 0;  // + recompute
};
// All FLOPs of one step over `sequences` sequences of `seq_len` tokens, summed over every rank.
StepFlops step_flops(const ModelShape& m, int64_t sequences, int64_t seq_len, model::Recompute recompute);

// One micro-batch of B sequences on one pipeline chunk of `blocks` blocks (and the head when `has_head`)
// on one of `tp` tensor-parallel ranks: the durations the pipeline simulation needs.
struct ChunkFlops {
  double forward = 0;
  double backward = 0;  // 2 × forward, plus the recompute forward
};
ChunkFlops chunk_flops(const ModelShape& m, int blocks, bool has_head, int64_t micro_batch_size, int64_t seq_len,
                       int tp, model::Recompute recompute);

// flops / (seconds · devices · peak per device): MFU when `flops` are model FLOPs, HFU when hardware FLOPs.
double utilization(double flops, double seconds, int devices, double peak_flops_per_device);

}  // namespace sp::planner
