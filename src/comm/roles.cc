#include "comm/roles.h"

#include <fmt/format.h>

#include "comm/deterministic.h"
#include "core/check.h"

namespace sp::comm {

std::string_view role_name(Role role) { return role == Role::kWorker ? "worker" : "server"; }

Result<RoleMap> RoleMap::create(int workers, int servers, int world) {
  if (servers < 0) return invalid_argument("parallel.servers = {} is negative", servers);
  if (servers > 0 && servers >= world)
    return invalid_argument("parallel.servers = {} ≥ world size {}: no rank is left to be a worker", servers, world)
        .with_hint(
            fmt::format("launch with mpirun -np {} (workers + servers) or lower parallel.servers", workers + servers));
  if (workers < 1) return invalid_argument("{} worker ranks: a run needs at least one worker", workers);
  if (workers + servers != world)
    return invalid_argument("world size {} ≠ workers {} + servers {} = {}", world, workers, servers, workers + servers)
        .with_hint(fmt::format("launch with mpirun -np {}", workers + servers));
  return RoleMap(workers, servers);
}

Role RoleMap::role_of(int rank) const {
  SP_CHECK(rank >= 0 && rank < world_size(), "rank {} is outside a world of {} workers + {} servers", rank, workers_,
           servers_);
  return rank < workers_ ? Role::kWorker : Role::kServer;
}

int RoleMap::server_index(int rank) const {
  SP_CHECK(is_server(rank), "rank {} is a worker, not a server", rank);
  return rank - workers_;
}

int RoleMap::server_rank(int j) const {
  SP_CHECK(j >= 0 && j < servers_, "server {} of {}", j, servers_);
  return workers_ + j;
}

KeyRange RoleMap::key_range(int64_t keys, int j) const {
  SP_CHECK(j >= 0 && j < servers_, "server {} of {}", j, servers_);
  const std::vector<int64_t> counts = even_split_counts(keys, servers_);
  int64_t begin = 0;
  for (int i = 0; i < j; ++i) begin += counts[static_cast<size_t>(i)];
  return {begin, begin + counts[static_cast<size_t>(j)]};
}

int RoleMap::owner_of(int64_t keys, int64_t k) const {
  SP_CHECK(k >= 0 && k < keys && servers_ > 0, "key {} of {} ({} servers)", k, keys, servers_);
  for (int j = 0; j < servers_; ++j)
    if (k < key_range(keys, j).end) return j;
  __builtin_unreachable();
}

std::string RoleMap::label(int rank, const ProcessGrid& grid) const {
  if (is_server(rank)) return fmt::format("server{}", server_index(rank));
  return grid.coords_of(rank).to_string();
}

}  // namespace sp::comm
