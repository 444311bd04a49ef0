#include "comm/communicator.h"

#include <array>

namespace sp::comm {
namespace {
constexpr std::array<std::string_view, 3> kReduceNames = {"sum", "max", "min"};
constexpr std::array<std::string_view, 11> kOpNames = {
    "all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "gather",
    "send",       "recv",           "isend",      "irecv",      "barrier",
};
}  // namespace

std::string_view reduce_op_name(ReduceOp op) { return kReduceNames[static_cast<size_t>(op)]; }

std::optional<ReduceOp> reduce_op_from_name(std::string_view name) {
  for (size_t i = 0; i < kReduceNames.size(); ++i)
    if (kReduceNames[i] == name) return static_cast<ReduceOp>(i);
  return std::nullopt;
}

std::string_view op_kind_name(OpKind op) { return kOpNames[static_cast<size_t>(op)]; }

std::optional<OpKind> op_kind_from_name(std::string_view name) {
  for (size_t i = 0; i < kOpNames.size(); ++i)
    if (kOpNames[i] == name) return static_cast<OpKind>(i);
  return std::nullopt;
}

bool op_is_p2p(OpKind op) {
  return op == OpKind::kSend || op == OpKind::kRecv || op == OpKind::kIsend || op == OpKind::kIrecv;
}

}  // namespace sp::comm
