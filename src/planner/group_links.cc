#include "planner/group_links.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "core/check.h"

namespace sp::planner {

nlohmann::json GroupLink::to_json() const {
  return {{"group_size", group_size},
          {"crosses_nodes", crosses_nodes},
          {"nodes_spanned", nodes_spanned},
          {"members_per_node", members_per_node},
          {"flows_per_node", flows_per_node},
          {"bandwidth_gbytes_per_s", bandwidth_bytes_per_s / 1e9},
          {"latency_us", latency_s * 1e6},
          {"all_to_all_gbytes_per_s", all_to_all_bandwidth_bytes_per_s / 1e9},
          {"link", link},
          {"description", description}};
}

Result<comm::ProcessGrid> place_on_cluster(const ClusterSpec& cluster, int dp, int tp, int pp) {
  const int64_t world = int64_t{dp} * tp * pp;
  if (world > cluster.devices()) {
    const int64_t nodes = (world + cluster.devices_per_node - 1) / cluster.devices_per_node;
    return invalid_argument(
               "impossible placement: dp {} × tp {} × pp {} = {} ranks, but cluster '{}' has nodes {} × "
               "devices_per_node {} = {} devices (one rank per device)",
               dp, tp, pp, world, cluster.name, cluster.nodes, cluster.devices_per_node, cluster.devices())
        .with_hint(fmt::format("--nodes {} gives {} devices", nodes, nodes * cluster.devices_per_node));
  }
  if (!cluster.rank_nodes.empty() && static_cast<int64_t>(cluster.rank_nodes.size()) != world)
    return invalid_argument("dp {} × tp {} × pp {} = {} ranks, but the recorded placement on '{}' has {}", dp, tp, pp,
                            world, cluster.name, cluster.rank_nodes.size())
        .with_hint("plan the run's own configuration (--run DIR) without changing its degrees");
  // Fewer ranks than devices: they fill the first devices by slot, as mpirun -np world does.
  return comm::ProcessGrid::create(dp, tp, pp, cluster.axis_order, static_cast<int>(world));
}

GroupLink axis_link(const ClusterSpec& cluster, const comm::ProcessGrid& grid, comm::Axis axis, HopPattern pattern) {
  SP_CHECK(grid.world_size() <= cluster.devices(), "grid {} on cluster '{}' of {} devices", grid.describe(),
           cluster.name, cluster.devices());
  const int n = grid.size(axis);
  GroupLink out;
  out.group_size = n;
  if (n == 1) {
    out.link = "none";
    out.description = "a group of one rank does not communicate";
    return out;
  }
  const auto groups = grid.all_groups(axis);
  const int hops_per_group = pattern == HopPattern::kRing ? n : n - 1;
  auto node = [&](int rank) { return cluster.node_of(rank); };
  // Hops leaving each node at once (ring or chain), and ranks of each node in cross-node groups (all-to-all).
  std::vector<int> flows(static_cast<size_t>(cluster.nodes), 0), a2a(static_cast<size_t>(cluster.nodes), 0);
  std::vector<char> spans(groups.size(), 0);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    for (int i = 0; i < hops_per_group; ++i)
      if (node(g[static_cast<size_t>(i)]) != node(g[static_cast<size_t>((i + 1) % n)]))
        ++flows[static_cast<size_t>(node(g[static_cast<size_t>(i)]))];
    spans[gi] = node(g.front()) != node(g.back()) ||
                std::any_of(g.begin(), g.end(), [&](int r) { return node(r) != node(g.front()); });
    if (spans[gi])
      for (int r : g) ++a2a[static_cast<size_t>(node(r))];
  }
  const double node_bw = cluster.inter ? cluster.inter->node_bandwidth_bytes_per_s() : 0;
  const double inter_lat = cluster.inter ? cluster.inter->latency_s : 0;
  bool have = false;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    double bw = std::numeric_limits<double>::infinity(), lat = 0;
    for (int i = 0; i < hops_per_group; ++i) {
      const int a = g[static_cast<size_t>(i)], b = g[static_cast<size_t>((i + 1) % n)];
      if (node(a) == node(b)) {
        bw = std::min(bw, cluster.intra.bandwidth_bytes_per_s);
        lat = std::max(lat, cluster.intra.latency_s);
      } else {
        SP_CHECK(cluster.inter.has_value(), "cluster '{}' spans nodes without [inter_node]", cluster.name);
        bw = std::min(bw, node_bw / flows[static_cast<size_t>(node(a))]);
        lat = std::max(lat, inter_lat);
      }
    }
    std::map<int, int> per_node;
    for (int r : g) ++per_node[node(r)];
    double a2a_bw = cluster.intra.bandwidth_bytes_per_s;
    if (spans[gi])
      for (const auto& [nd, count] : per_node) a2a_bw = std::min(a2a_bw, node_bw / a2a[static_cast<size_t>(nd)]);
    if (!have || bw < out.bandwidth_bytes_per_s || (bw == out.bandwidth_bytes_per_s && lat > out.latency_s)) {
      have = true;
      out.bandwidth_bytes_per_s = bw;
      out.latency_s = lat;
      out.crosses_nodes = spans[gi];
      out.nodes_spanned = static_cast<int>(per_node.size());
      out.members_per_node = 0;
      for (const auto& [nd, count] : per_node) out.members_per_node = std::max(out.members_per_node, count);
      out.all_to_all_bandwidth_bytes_per_s = a2a_bw;
    }
  }
  out.flows_per_node = *std::max_element(flows.begin(), flows.end());
  const std::string intra_kind = link_kind_name(cluster.intra.kind);
  if (!out.crosses_nodes) {
    out.link = "intra-node " + intra_kind;
    out.description = fmt::format("{} inside one node: {:.4g} GB/s per direction per device, {:.3g} us per hop",
                                  intra_kind, cluster.intra.bandwidth_bytes_per_s / 1e9, cluster.intra.latency_s * 1e6);
  } else {
    const std::string net = network_kind_name(cluster.inter->kind);
    out.link = "inter-node " + net;
    out.description = fmt::format(
        "{} between {} nodes: {} NICs × {:.4g} GB/s = {:.4g} GB/s per node, shared by {} hops leaving the busiest "
        "node at once = {:.4g} GB/s per hop (intra-node hops {:.4g} GB/s); {:.3g} us per hop",
        net, out.nodes_spanned, cluster.inter->nics_per_node, cluster.inter->nic_bandwidth_bytes_per_s / 1e9,
        node_bw / 1e9, out.flows_per_node, out.bandwidth_bytes_per_s / 1e9, cluster.intra.bandwidth_bytes_per_s / 1e9,
        out.latency_s * 1e6);
  }
  return out;
}

}  // namespace sp::planner
