// RoleMap: which world ranks are workers and which are parameter servers, and the key range each
// server owns — pure arithmetic, like ProcessGrid (no MPI, no model). It is not the grid: the workers
// form the (dp, tp, pp) grid exactly as an all-reduce run would, and the servers are S extra ranks
// after them. Invariant: ranks [0, W) are workers (world rank = grid rank), ranks [W, W + S) are
// servers (server j is rank W + j), and server j owns the contiguous keys [begin_j, end_j) of the flat
// parameter space, the even split of its elements (4 bytes each, so balanced by bytes). With S = 0
// every rank is a worker: the all-reduce architecture. Reference: docs/ps.md §Roles,
// docs/formats/topology.md §"Parameter server".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "comm/process_grid.h"
#include "core/status.h"

namespace sp::comm {

enum class Role { kWorker, kServer };
std::string_view role_name(Role role);  // "worker", "server"

// The group every push and pull travels on: all ranks, point to point.
inline constexpr std::string_view kPsGroupName = "ps";

// Elements [begin, end) of a flat key space.
struct KeyRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const KeyRange&) const = default;
};

class RoleMap {
 public:
  // Errors (kInvalidArgument), each naming the equation: workers < 1, servers < 0, servers ≥ world
  // ("no rank is left to be a worker"), world ≠ workers + servers.
  static Result<RoleMap> create(int workers, int servers, int world);

  int workers() const { return workers_; }
  int servers() const { return servers_; }
  int world_size() const { return workers_ + servers_; }
  bool parameter_server() const { return servers_ > 0; }

  // SP_CHECK on a rank outside [0, world): callers index with ranks the map produced.
  Role role_of(int rank) const;
  bool is_server(int rank) const { return role_of(rank) == Role::kServer; }
  int server_index(int rank) const;  // j of server rank W + j
  int server_rank(int j) const;      // W + j
  // Server j's keys of a flat space of `keys` elements: the even split (comm/deterministic.h).
  KeyRange key_range(int64_t keys, int j) const;
  // The server that owns key `k` (k < keys).
  int owner_of(int64_t keys, int64_t k) const;
  // "dp1.tp0.pp0" for a worker (its grid coordinates), "server0" for server 0.
  std::string label(int rank, const ProcessGrid& grid) const;

 private:
  RoleMap(int workers, int servers) : workers_(workers), servers_(servers) {}
  int workers_;
  int servers_;
};

}  // namespace sp::comm
