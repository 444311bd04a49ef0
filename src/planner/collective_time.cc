#include "planner/collective_time.h"

#include "core/check.h"

namespace sp::planner {

std::string collective_name(Collective op) {
  switch (op) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kReduceScatter:
      return "reduce_scatter";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kAllToAll:
      return "all_to_all";
    case Collective::kSendRecv:
      return "send_recv";
  }
  return "?";
}

std::string collective_formula(Collective op) {
  switch (op) {
    case Collective::kAllReduce:
      return "ring: 2(n-1)·α + 2(n-1)/n·S/B";
    case Collective::kReduceScatter:
      return "ring: (n-1)·α + (n-1)/n·S/B, S = full input";
    case Collective::kAllGather:
      return "ring: (n-1)·α + (n-1)/n·S/B, S = full output";
    case Collective::kAllToAll:
      return "pairwise: (n-1)·α + (n-1)/n·S/B_a2a, S = one rank's send buffer";
    case Collective::kSendRecv:
      return "one hop: α + S/B";
  }
  return "?";
}

double collective_seconds(Collective op, double bytes, const GroupLink& link) {
  SP_CHECK(bytes >= 0, "collective of {} bytes", bytes);
  const double n = link.group_size;
  if (link.group_size <= 1) return 0.0;
  SP_CHECK(link.bandwidth_bytes_per_s > 0, "a group of {} ranks with no bandwidth", link.group_size);
  const double a = link.latency_s, b = link.bandwidth_bytes_per_s;
  switch (op) {
    case Collective::kAllReduce:
      return 2 * (n - 1) * a + 2 * (n - 1) / n * bytes / b;
    case Collective::kReduceScatter:
    case Collective::kAllGather:
      return (n - 1) * a + (n - 1) / n * bytes / b;
    case Collective::kAllToAll:
      return (n - 1) * a + (n - 1) / n * bytes / link.all_to_all_bandwidth_bytes_per_s;
    case Collective::kSendRecv:
      return a + bytes / b;
  }
  return 0.0;
}

const std::vector<std::string>& time_model_assumptions() {
  static const std::vector<std::string> k = {
      "one rank per device; rank r on node floor(r / devices_per_node), ranks ordered by the grid's axis order",
      "collectives are rings through the group in group-rank order (p2p: the pipeline neighbour), one algorithm "
      "per op, no protocol choice and no per-call base latency (NCCL adds about 8 us per call)",
      "a hop inside a node gets the intra-node link's full per-direction bandwidth (optimistic for PCIe through a "
      "CPU root complex)",
      "a hop leaving a node shares the node's NICs evenly with every other hop leaving it at the same time; all "
      "groups of an axis communicate at once; several NCCL channels let one flow use several NICs",
      "bandwidths and latencies are the cluster file's peaks; no congestion inside the network fabric",
  };
  return k;
}

}  // namespace sp::planner
