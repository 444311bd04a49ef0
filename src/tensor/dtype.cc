#include "tensor/dtype.h"

#include <array>
#include <utility>

namespace sp {
namespace {
struct Row {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr std::array<Row, 13> kTable = {{
    {DType::kF32, "F32", 4},
    {DType::kBF16, "BF16", 2},
    {DType::kF16, "F16", 2},
    {DType::kF64, "F64", 8},
    {DType::kI64, "I64", 8},
    {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},
    {DType::kI8, "I8", 1},
    {DType::kU8, "U8", 1},
    {DType::kU16, "U16", 2},
    {DType::kU32, "U32", 4},
    {DType::kU64, "U64", 8},
    {DType::kBool, "BOOL", 1},
}};
}  // namespace

size_t dtype_size(DType t) { return kTable[static_cast<size_t>(t)].size; }
std::string_view dtype_name(DType t) { return kTable[static_cast<size_t>(t)].name; }
std::optional<DType> dtype_from_name(std::string_view name) {
  for (const Row& r : kTable)
    if (r.name == name) return r.type;
  return std::nullopt;
}

}  // namespace sp
