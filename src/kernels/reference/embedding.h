// Naive twin of kernels/embedding.h (same names, signatures and accumulation rules): the oracle
// for tests, written as the obvious per-element loops.
// Reference: Megatron VocabParallelEmbedding; docs/kernels.md §embedding.
#pragma once

#include <cstdint>

namespace sp::kernels::reference {

void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C, int64_t v_begin,
                       int64_t v_count);
void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t N, int64_t C, int64_t v_begin,
                        int64_t v_count);

}  // namespace sp::kernels::reference
