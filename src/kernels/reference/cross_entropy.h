// Naive twin of kernels/cross_entropy.h (same names, signatures and semantics), in double with
// std::exp and std::log: the oracle for tests, not for training.
// The tp = 1 forward computes each loss from its definition, independent of the split parts.
#pragma once

#include <cstdint>

namespace sp::kernels::reference {

void cross_entropy_row_max(float* rowmax, const float* logits, int64_t N, int64_t Vl);
void cross_entropy_row_sumexp(float* sumexp, const float* logits, const float* rowmax, int64_t N, int64_t Vl);
void cross_entropy_target_logit(float* tlogit, const float* logits, const int32_t* targets, int64_t N, int64_t Vl,
                                int64_t v_begin);
void cross_entropy_losses(float* losses, const float* rowmax, const float* sumexp, const float* tlogit,
                          const int32_t* targets, int64_t N);
void cross_entropy_backward(float* dlogits, const float* logits, const float* rowmax, const float* sumexp,
                            const int32_t* targets, int64_t N, int64_t Vl, int64_t v_begin, float scale);
double cross_entropy_forward(float* losses, float* rowmax, float* sumexp, const float* logits, const int32_t* targets,
                             int64_t N, int64_t V);

}  // namespace sp::kernels::reference
