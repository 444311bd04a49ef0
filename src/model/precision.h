// The numeric precision of the model: fp32 (the reference), or bf16 / fp16 mixed precision, where the
// working weights, the activations stored for backward and every GEMM input are 16-bit, GEMMs accumulate
// in fp32, and norms, softmax, the loss and the optimizer stay fp32 (every cast: docs/kernels.md §"Every cast").
// grad is the dtype in which parameter gradients are accumulated over micro-batches and reduced over dp:
// fp32 (Megatron's default, accumulate_allreduce_grads_in_fp32) or the 16-bit compute dtype (what the
// ZeRO paper counts: 2Ψ bytes of gradients). Either way the model computes one micro-batch's parameter
// gradient into an fp32 leaf (GradSink); a 16-bit grad dtype rounds that leaf once when it is handed on.
// Not the optimizer: master weights and AdamW moments are fp32 in every precision.
#pragma once

#include <string_view>

#include "core/status.h"
#include "tensor/dtype.h"

namespace sp::model {

struct Precision {
  DType compute = DType::kF32;  // kF32, kBF16 or kF16
  DType grad = DType::kF32;     // kF32, or the same 16-bit dtype as compute
  bool mixed() const { return compute != DType::kF32; }
};

// "fp32" | "bf16" | "fp16" (the config spellings) ↔ kF32 | kBF16 | kF16.
std::string_view precision_name(DType t);
Result<DType> precision_dtype_from_name(std::string_view name, std::string_view key);

// Validates a (train.precision, train.grad_dtype) pair: grad_dtype is "fp32" or the precision's own
// 16-bit dtype; errors name the key, the value and the allowed values.
Result<Precision> precision_from_names(std::string_view precision, std::string_view grad_dtype);

}  // namespace sp::model
