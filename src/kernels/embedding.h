// Token embedding lookup, vocab-parallel ready: this rank holds rows [v_begin, v_begin + v_count)
// of the (V, C) table; tokens outside that range give zero rows (the TP all-reduce fills them in).
// Not a validator: token ids are checked against the vocabulary by the data layer.
// Accumulation rule: parameter gradients +=, activation gradients =, residual-stream gradients +=.
// Determinism: the backward adds rows in token order n = 0..N−1.
// Reference: Megatron VocabParallelEmbedding; twin in kernels/reference/embedding.h; docs/kernels.md.
#pragma once

#include <cstdint>

namespace sp::kernels {

// out (N, C) = table[tok − v_begin] if v_begin ≤ tok < v_begin + v_count, else 0.  table (v_count, C)
void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C, int64_t v_begin,
                       int64_t v_count);

// dtable (v_count, C) += dout rows of in-range tokens, in token order.  (parameter gradient: +=)
void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t N, int64_t C, int64_t v_begin,
                        int64_t v_count);

}  // namespace sp::kernels
