// Cross-entropy parts (cross_entropy.h) over 16-bit logits (bf16 or fp16, t): the mixed-precision LM head
// stores its logits in 16 bits, as PyTorch autocast's linear returns them, and rounds dlogits in place.
// Not new math: each row is widened exactly into `row` (Vl floats of caller scratch) and passed to the
// fp32 row code, so every result equals the fp32 function on the widened logits bit for bit, and the
// backward's fp32 dlogits are rounded to nearest even once (tests/unit/kernels16_test.cc).
// Reference: docs/kernels.md §"Every cast".
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace sp::kernels {

// cross_entropy_row_max of the widened logits (N, Vl).
void cross_entropy16_row_max(float* rowmax, const uint16_t* logits, int64_t N, int64_t Vl, DType t, float* row);

// cross_entropy_row_sumexp of the widened logits.
void cross_entropy16_row_sumexp(float* sumexp, const uint16_t* logits, const float* rowmax, int64_t N, int64_t Vl,
                                DType t, float* row);

// cross_entropy_target_logit of the widened logits.
void cross_entropy16_target_logit(float* tlogit, const uint16_t* logits, const int32_t* targets, int64_t N, int64_t Vl,
                                  int64_t v_begin, DType t);

// dlogits (N, Vl) 16-bit = round(cross_entropy_backward of the widened logits); dlogits may alias logits.
void cross_entropy16_backward(uint16_t* dlogits, const uint16_t* logits, const float* rowmax, const float* sumexp,
                              const int32_t* targets, int64_t N, int64_t Vl, int64_t v_begin, float scale, DType t,
                              float* row);

}  // namespace sp::kernels
