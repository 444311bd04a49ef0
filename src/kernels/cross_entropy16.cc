// 16-bit-logit cross-entropy (cross_entropy16.h): widen a row, run the fp32 row code, round back.
#include "kernels/cross_entropy16.h"

#include "core/time_split.h"
#include "kernels/cross_entropy.h"
#include "tensor/float16.h"

namespace sp::kernels {

void cross_entropy16_row_max(float* rowmax, const uint16_t* logits, int64_t N, int64_t Vl, DType t, float* row) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);  // one scope: the rows' fp32 calls nest in it
  for (int64_t n = 0; n < N; ++n) {
    f32_from_float16(row, logits + n * Vl, Vl, t);
    cross_entropy_row_max(rowmax + n, row, 1, Vl);
  }
}

void cross_entropy16_row_sumexp(float* sumexp, const uint16_t* logits, const float* rowmax, int64_t N, int64_t Vl,
                                DType t, float* row) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    f32_from_float16(row, logits + n * Vl, Vl, t);
    cross_entropy_row_sumexp(sumexp + n, row, rowmax + n, 1, Vl);
  }
}

void cross_entropy16_target_logit(float* tlogit, const uint16_t* logits, const int32_t* targets, int64_t N, int64_t Vl,
                                  int64_t v_begin, DType t) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t local = static_cast<int64_t>(targets[n]) - v_begin;
    float x = 0.0f;
    if (targets[n] >= 0 && local >= 0 && local < Vl) f32_from_float16(&x, logits + n * Vl + local, 1, t);
    tlogit[n] = x;
  }
}

void cross_entropy16_backward(uint16_t* dlogits, const uint16_t* logits, const float* rowmax, const float* sumexp,
                              const int32_t* targets, int64_t N, int64_t Vl, int64_t v_begin, float scale, DType t,
                              float* row) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t n = 0; n < N; ++n) {
    f32_from_float16(row, logits + n * Vl, Vl, t);
    cross_entropy_backward(row, row, rowmax + n, sumexp + n, targets + n, 1, Vl, v_begin, scale);
    float16_from_f32(dlogits + n * Vl, row, Vl, t);
  }
}

}  // namespace sp::kernels
