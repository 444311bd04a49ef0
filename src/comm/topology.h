// topology.json: where every rank of a run lived (coords, host, pid, CPU affinity) and which groups
// the grid formed. write_topology gathers one RankInfo per rank to rank 0, which writes the file
// atomically; validate_topology re-derives the grid from the file alone and checks every rank and
// group against the grid equation (used by `trace check` and the gate).
// Invariant: the groups listed equal ProcessGrid::all_groups for the recorded sizes and axis order.
// Reference: docs/formats/topology.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/process_grid.h"
#include "core/status.h"

namespace sp::comm {

inline constexpr std::string_view kTopologyFileName = "topology.json";
inline constexpr int kTopologyFormatVersion = 1;

struct RankInfo {
  int world_rank = 0;
  Coords coords;
  std::string host = {};
  int64_t pid = 0;
  std::vector<int> cpu_affinity = {};  // sched_getaffinity, ascending CPU ids
};

// This process's entry (host from gethostname, pid, affinity).
RankInfo local_rank_info(const ProcessGrid& grid, int world_rank);

// The document; `ranks` must hold one entry per world rank, in rank order.
nlohmann::json topology_json(const ProcessGrid& grid, std::span<const RankInfo> ranks);

// Collective over `world` (every rank calls it): gathers the ranks' RankInfo to group rank 0, which
// writes DIR/topology.json atomically. All ranks return the same Status (rank 0's write result).
Status write_topology(Communicator& world, const ProcessGrid& grid, const std::string& run_dir);

// Checks a parsed topology.json: version, sizes ≥ 1 and world_size = dp·tp·pp, axis_order a
// permutation, every world rank exactly once with coords equal to the grid equation's, and the
// dp/tp/pp group lists equal to the grid's. Errors name the key ("ranks[3].coords.tp").
Status validate_topology(const nlohmann::json& topology);
// The grid a valid topology describes.
Result<ProcessGrid> grid_from_topology(const nlohmann::json& topology);

}  // namespace sp::comm
