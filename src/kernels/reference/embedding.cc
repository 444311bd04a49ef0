// Naive embedding: per element, per token; the backward sums each table element in double over all
// tokens that hit its row (token order), then adds the sum to the existing gradient once.
// Not the fast kernel's rounding (it adds row by row in fp32); agreement is to tolerance.
#include "kernels/reference/embedding.h"

namespace sp::kernels::reference {

void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t N, int64_t C, int64_t v_begin,
                       int64_t v_count) {
  for (int64_t n = 0; n < N; ++n) {
    const int64_t tok = tokens[n];
    const bool local = tok >= v_begin && tok < v_begin + v_count;
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = local ? table[(tok - v_begin) * C + c] : 0.0f;
  }
}

void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t N, int64_t C, int64_t v_begin,
                        int64_t v_count) {
  for (int64_t v = 0; v < v_count; ++v) {
    for (int64_t c = 0; c < C; ++c) {
      double acc = 0.0;
      for (int64_t n = 0; n < N; ++n)
        if (tokens[n] == v_begin + v) acc += dout[n * C + c];
      dtable[v * C + c] = static_cast<float>(static_cast<double>(dtable[v * C + c]) + acc);
    }
  }
}

}  // namespace sp::kernels::reference
