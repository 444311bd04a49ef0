// Naive twin of kernels/attention.h (same names, signatures and semantics): explicit loops over
// (b, h, i, j, d) in double, no BLAS, no blocking. The oracle for tests, not for training.
// Reference: HF LlamaAttention (eager) with repeat_kv; docs/kernels.md §attention.
#pragma once

#include <cstdint>

namespace sp::kernels::reference {

void attention_forward(float* out, float* probs, const float* qkv, int64_t B, int64_t T, int64_t H, int64_t KV,
                       int64_t D);
void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv, const float* probs, int64_t B,
                        int64_t T, int64_t H, int64_t KV, int64_t D);
int64_t attention_scratch_floats(int64_t T);

}  // namespace sp::kernels::reference
