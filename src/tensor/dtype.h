// Element types. The engine computes in F32 today; BF16/F16 exist so that formats (safetensors,
// checkpoints, ledger) already carry the dtype and mixed precision can land without format changes.
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
