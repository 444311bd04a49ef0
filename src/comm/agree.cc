#include "comm/agree.h"

#include <vector>

namespace sp::comm {

std::string broadcast_string(Communicator& comm, const std::string& value, int root) {
  int64_t n = comm.rank() == root ? static_cast<int64_t>(value.size()) : 0;
  comm.broadcast(&n, 1, DType::kI64, root);
  std::string out = comm.rank() == root ? value : std::string(static_cast<size_t>(n), '\0');
  if (n > 0) comm.broadcast(out.data(), n, DType::kU8, root);
  return out;
}

std::string broadcast_string(Communicator& comm, const std::string& value) { return broadcast_string(comm, value, 0); }

Status agree(Communicator& comm, const Status& local) {
  const int n = comm.size();
  std::vector<int64_t> codes(static_cast<size_t>(n));
  const int64_t mine = static_cast<int64_t>(local.code());
  comm.all_gather(&mine, codes.data(), std::vector<int64_t>(static_cast<size_t>(n), 1), DType::kI64);
  int first = -1;
  for (int r = 0; r < n && first < 0; ++r)
    if (codes[static_cast<size_t>(r)] != 0) first = r;
  if (first < 0) return Status();
  const std::string msg = broadcast_string(comm, local.message(), first);
  const std::string hint = broadcast_string(comm, local.hint(), first);
  const std::string prefix =
      first == 0 ? "" : "rank " + std::to_string(comm.world_ranks()[static_cast<size_t>(first)]) + ": ";
  return Status(static_cast<StatusCode>(codes[static_cast<size_t>(first)]), prefix + msg, hint);
}

}  // namespace sp::comm
