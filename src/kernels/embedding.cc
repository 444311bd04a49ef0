// Embedding lookup and scatter-add (embedding.h): row copies and row adds, vectorized over C.
// Not a bounds checker: out-of-shard tokens are skipped by design, invalid ids are the data layer's.
// Invariant: the backward visits tokens in order n = 0..N−1, so repeated ids add in a fixed order.
// Reference: Megatron VocabParallelEmbedding; docs/kernels.md §embedding.
#include "kernels/embedding.h"

#include <cstring>

#include "core/time_split.h"

namespace sp::kernels {

void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C, int64_t v_begin,
                       int64_t v_count) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = static_cast<int64_t>(tokens[n]) - v_begin;
    float* o = out + n * C;  // (C)
    if (row >= 0 && row < v_count) {
      std::memcpy(o, table + row * C, static_cast<size_t>(C) * sizeof(float));
    } else {
      std::memset(o, 0, static_cast<size_t>(C) * sizeof(float));
    }
  }
}

void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t N, int64_t C, int64_t v_begin,
                        int64_t v_count) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t row = static_cast<int64_t>(tokens[n]) - v_begin;
    if (row < 0 || row >= v_count) continue;
    float* d = dtable + row * C;  // (C)
    const float* g = dout + n * C;
    for (int64_t c = 0; c < C; ++c) d[c] += g[c];
  }
}

}  // namespace sp::kernels
