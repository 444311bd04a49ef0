// Softmax cross-entropy over the vocabulary, split into parts so that a vocab-parallel caller can
// all-reduce the row max (MAX) and the sums of exponentials (SUM) between them (Megatron
// VocabParallelCrossEntropy). This rank holds logits for vocab ids [v_begin, v_begin + Vl);
// targets are global ids; a target < 0 is ignored (loss 0, gradient row 0).
// Accumulation rule: parameter gradients +=, activation gradients =, residual-stream gradients +=.
// dlogits is an activation gradient (=) and may alias logits. exp is exp_fast (vec_math.h); sums
// of exponentials and log are in double, rounded to fp32 once.
// Reference: Megatron-LM tensor_parallel/cross_entropy.py; twin kernels/reference/cross_entropy.h.
#pragma once

#include <cstdint>

namespace sp::kernels {

// rowmax (N) = max_v logits[n, v] over the local shard.  logits (N, Vl)
void cross_entropy_row_max(float* rowmax, const float* logits, int64_t N, int64_t Vl);

// sumexp (N) = Σ_v exp(logits[n, v] − rowmax[n]) over the local shard (rowmax: the global max).
void cross_entropy_row_sumexp(float* sumexp, const float* logits, const float* rowmax, int64_t N, int64_t Vl);

// tlogit (N) = logits[n, target − v_begin] if v_begin ≤ target < v_begin + Vl, else 0.
void cross_entropy_target_logit(float* tlogit, const float* logits, const int32_t* targets, int64_t N, int64_t Vl,
                                int64_t v_begin);

// losses (N) = log(sumexp[n]) + rowmax[n] − tlogit[n], or 0 where targets[n] < 0. losses may alias tlogit.
void cross_entropy_losses(float* losses, const float* rowmax, const float* sumexp, const float* tlogit,
                          const int32_t* targets, int64_t N);

// dlogits (N, Vl) = (exp(l − rowmax)/sumexp − [v == target]) · scale; zero rows for ignored targets.
// "="; dlogits may alias logits (in place).
void cross_entropy_backward(float* dlogits, const float* logits, const float* rowmax, const float* sumexp,
                            const int32_t* targets, int64_t N, int64_t Vl, int64_t v_begin, float scale);

// tp = 1 convenience: all of the above with v_begin = 0, Vl = V. Writes losses, rowmax, sumexp (N each),
// returns Σ losses in double (in order n = 0..N−1). Every target must be < V (checked).
double cross_entropy_forward(float* losses, float* rowmax, float* sumexp, const float* logits, const int32_t* targets,
                             int64_t N, int64_t V);

}  // namespace sp::kernels
