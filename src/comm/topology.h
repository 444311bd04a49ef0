// topology.json: where every rank of a run lived (coords, host, pid, CPU affinity) and which groups
// the grid formed. write_topology gathers one RankInfo per rank to rank 0, which writes the file
// atomically; validate_topology re-derives the grid from the file alone and checks every rank and
// group against the grid equation (used by `trace check` and the gate).
// Invariant: the groups listed equal ProcessGrid::all_groups for the recorded sizes and axis order.
// A parameter-server run (roles.h) adds each rank's role, the "ps" group and every server's key range;
// its grid is the workers' (world_size = dp·tp·pp + servers). Reference: docs/formats/topology.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/process_grid.h"
#include "comm/roles.h"
#include "core/status.h"

namespace sp::comm {

inline constexpr std::string_view kTopologyFileName = "topology.json";
inline constexpr int kTopologyFormatVersion = 1;

struct RankInfo {
  int world_rank = 0;
  Coords coords;    // a worker's grid coordinates (unused for a server)
  int server = -1;  // a server's index j (−1: a worker)
  std::string host = {};
  int64_t pid = 0;
  std::vector<int> cpu_affinity = {};  // sched_getaffinity, ascending CPU ids
  std::string blas_core = {};          // openblas_get_corename() (it changes fp32 bits); "" when not recorded
};

// The parameter-server part of the document: the roles and every server's key range.
struct PsTopology {
  RoleMap roles;
  int64_t keys = 0;                         // elements of the flat parameter space
  std::vector<nlohmann::json> pieces = {};  // per server: what its keys cover ({"unit", "begin", "end"}), for people
};

// This process's entry (host from gethostname, pid, affinity).
RankInfo local_rank_info(const ProcessGrid& grid, int world_rank, const RoleMap* roles = nullptr);

// The document; `ranks` must hold one entry per world rank, in rank order.
nlohmann::json topology_json(const ProcessGrid& grid, std::span<const RankInfo> ranks, const PsTopology* ps = nullptr);

// Collective over `world` (every rank calls it): gathers the ranks' RankInfo to group rank 0, which
// writes DIR/topology.json atomically. All ranks return the same Status (rank 0's write result).
Status write_topology(Communicator& world, const ProcessGrid& grid, const std::string& run_dir,
                      const PsTopology* ps = nullptr);

// Checks a parsed topology.json: version, sizes ≥ 1 and world_size = dp·tp·pp (+ servers), axis_order a
// permutation, every world rank exactly once with coords equal to the grid equation's (a server: its
// role and index), the dp/tp/pp group lists equal to the grid's, and (parameter server) the "ps" group
// and the key ranges: the even split of the keys over the servers, in order. Errors name the key
// ("ranks[3].coords.tp", "key_ranges[1].begin").
Status validate_topology(const nlohmann::json& topology);
// The (workers') grid a valid topology describes.
Result<ProcessGrid> grid_from_topology(const nlohmann::json& topology);
// Its roles (every rank a worker for an all-reduce run).
Result<RoleMap> roles_from_topology(const nlohmann::json& topology);

}  // namespace sp::comm
