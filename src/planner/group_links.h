// Group links: which physical link each communication group of a strategy crosses on a cluster, and
// what bandwidth and latency a hop of it gets while every group of the same axis runs at once. It is not
// a network simulator: no routing, no congestion beyond the one shared resource modelled, a node's NICs.
// Placement is the engine's own: ranks come from comm::ProcessGrid with the cluster's axis order, and rank
// r runs on node ⌊r / devices_per_node⌋ (mpirun by-slot), so a tp group of 8 with order "tp-dp-pp" sits
// inside one DGX node while the same group with order "dp-tp-pp" spans 8 nodes; a run's recorded hosts
// replace the by-slot rule where the cluster carries them (ClusterSpec::rank_nodes).
// Model (docs/plan.md §time): a group's collective runs as a ring through its members in group-rank
// order (p2p: a chain, no wrap-around). A hop between two devices of one node gets the intra-node link's
// per-direction bandwidth. A hop that leaves node n shares n's NICs with every other hop leaving n at the
// same time (all groups of the axis are active together): bandwidth = nics · nic_bandwidth / flows(n).
// The ring's bandwidth is its slowest hop's, its per-step latency its slowest hop's latency.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "comm/process_grid.h"
#include "core/status.h"
#include "planner/cluster.h"

namespace sp::planner {

// How a group's traffic moves: kRing for collectives (hop g → g+1 mod n), kChain for pipeline p2p
// (hop g → g+1, no wrap-around).
enum class HopPattern { kRing, kChain };

struct GroupLink {
  int group_size = 1;
  bool crosses_nodes = false;
  int nodes_spanned = 1;             // nodes the worst group has members on
  int members_per_node = 1;          // most members of the worst group on one node
  int flows_per_node = 0;            // hops leaving the busiest node at once, over all groups of the axis
  double bandwidth_bytes_per_s = 0;  // the worst group's slowest hop, per direction; 0 when group_size == 1
  double latency_s = 0;              // the worst group's slowest hop latency
  // Per-rank share of the node's NICs when every member of every cross-node group sends off-node at
  // once (all-to-all); equals bandwidth_bytes_per_s for a group inside a node.
  double all_to_all_bandwidth_bytes_per_s = 0;
  std::string link;         // "intra-node nvswitch", "inter-node infiniband"
  std::string description;  // the numbers behind the bandwidth, for the report's assumptions
  nlohmann::json to_json() const;
};

// The grid of a strategy on `cluster`: ranks 0 … dp·tp·pp − 1 on the first devices by slot (a plan may use
// fewer devices than the cluster has, as `mpirun -np N` on a bigger allocation does); kInvalidArgument
// (exit 2) naming both sides when dp·tp·pp exceeds the device count — an impossible placement — with the
// --nodes that would fit.
Result<comm::ProcessGrid> place_on_cluster(const ClusterSpec& cluster, int dp, int tp, int pp);

// The link of `axis` on `grid` (at most the cluster's device count; SP_CHECK): the worst group,
// i.e. the one with the lowest hop bandwidth (ties: the highest latency), since every group runs at once
// and the step waits for the slowest.
GroupLink axis_link(const ClusterSpec& cluster, const comm::ProcessGrid& grid, comm::Axis axis, HopPattern pattern);

}  // namespace sp::planner
