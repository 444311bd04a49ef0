// Where the ranks of a calibration run: every rank's host, gathered, and the node layout the planner assumes
// (cluster.h: rank r on node ⌊r / devices_per_node⌋, mpirun's by-slot mapping), checked against it. A
// calibration across hosts (a hostfile, docs/cluster.md) measures the link inside a host between two ranks of
// the first host and the network between the first rank of the first and of the second host.
// Not a topology reader: a run's own placement is its topology.json (cluster.h with_rank_hosts).
// Invariant: a RankHosts that exists has equal, contiguous blocks of ranks per host (by slot).
#pragma once

#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"

namespace sp::planner {

struct RankHosts {
  std::vector<std::string> host_of_rank;  // by world rank
  std::vector<std::string> hosts;         // distinct, in rank order: node i is hosts[i]
  int ranks_per_host = 0;
  int nodes() const { return static_cast<int>(hosts.size()); }
  // The two world ranks whose link is measured: inside the first host (ranks 0 and 1) and between the first
  // two hosts (rank 0 and the second host's first rank); -1 when there is no such pair.
  int intra_peer() const { return ranks_per_host >= 2 ? 1 : -1; }
  int inter_peer() const { return nodes() >= 2 ? ranks_per_host : -1; }
};

// Collective over `world`: every rank passes its own host name (≤ 255 bytes) and gets every rank's.
// kInvalidArgument, identical on every rank, when the ranks are not placed by slot in equal blocks (e.g.
// `--map-by node`, or hosts with different slot counts), or when several hosts have one rank each (no link
// inside a host to measure), with the hostfile that fixes it.
Result<RankHosts> gather_rank_hosts(comm::Communicator& world, const std::string& host);

}  // namespace sp::planner
