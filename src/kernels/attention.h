// Causal multi-head self-attention with grouped-query KV heads, as Hugging Face LlamaAttention
// (eager path): scores = q·kᵀ/sqrt(D), causal mask, softmax in fp32, out = P·v. q head h reads kv
// head h / (H/KV). Input is the fused qkv projection output with RoPE already applied.
// Not flash attention: the (T, T) probabilities are materialized and saved for the backward.
// Accumulation rule: parameter gradients +=, activation gradients =, residual-stream gradients +=.
// dqkv is an activation gradient (=): every element is written, the k/v parts summed over the
// H/KV query heads of their group in head order.
// Reference: Vaswani et al. 2017 §3.2; Ainslie et al. 2023 (GQA); twin kernels/reference/attention.h.
#pragma once

#include <cstdint>

namespace sp::kernels {

// qkv (B, T, (H + 2KV)·D): per token row [q heads (H·D) | k heads (KV·D) | v heads (KV·D)].
// out (B, T, H·D).  probs (B, H, T, T): saved softmax, row i valid for j ≤ i, exact zeros above.
void attention_forward(float* out, float* probs, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                       int64_t D);

// probs (B, H, T, T) alone, bit for bit those attention_forward writes (the same row-block products and
// softmax): selective recomputation (model/llama_stage.h) rebuilds P from the saved qkv in backward.
void attention_probs_forward(float* probs, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV, int64_t D);

// dqkv (B, T, (H + 2KV)·D) = ∂L/∂qkv given dout (B, T, H·D) and the forward's qkv and probs.
// With P the probs of one (b, h) and dP = dout·vᵀ:  dS = P ⊙ (dP − rowsum(P ⊙ dP)),
// dq = dS·k/sqrt(D),  dk = Σ_group dSᵀ·q/sqrt(D),  dv = Σ_group Pᵀ·dout.
// scratch: at least attention_scratch_floats(T) floats, contents clobbered.
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* probs, int64_t B,
                        int64_t T, int64_t H, int64_t KV, int64_t D);

// Floats of scratch attention_backward needs: one (T, T) matrix.
int64_t attention_scratch_floats(int64_t T);

}  // namespace sp::kernels
