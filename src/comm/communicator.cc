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

std::unique_ptr<Request> Communicator::iall_reduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  all_reduce(data, count, dtype, op);
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<Request> Communicator::ireduce_scatter(const void* send, void* recv, std::span<const int64_t> counts,
                                                       DType dtype, ReduceOp op) {
  reduce_scatter(send, recv, counts, dtype, op);
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<Request> Communicator::iall_gather(const void* send, void* recv, std::span<const int64_t> counts,
                                                   DType dtype) {
  all_gather(send, recv, counts, dtype);
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<Request> Communicator::iall_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                                                   std::span<const int64_t> recv_counts, DType dtype) {
  all_to_all(send, send_counts, recv, recv_counts, dtype);
  return std::make_unique<DoneRequest>();
}

bool op_is_p2p(OpKind op) {
  return op == OpKind::kSend || op == OpKind::kRecv || op == OpKind::kIsend || op == OpKind::kIrecv;
}

}  // namespace sp::comm
