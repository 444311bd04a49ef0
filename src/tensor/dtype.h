// Element types. The engine computes in F32; BF16/F16 are the 16-bit working formats of mixed
// precision (conversions in tensor/float16.h), also carried by the file formats (safetensors, checkpoints).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sp {

enum class DType : uint8_t { kF32, kBF16, kF16, kF64, kI64, kI32, kI16, kI8, kU8, kU16, kU32, kU64, kBool };

size_t dtype_size(DType t);
// The safetensors spelling: "F32", "BF16", ...
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace sp
