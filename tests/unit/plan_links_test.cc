// Group links and collective times (planner/group_links.h, planner/collective_time.h) against closed forms
// worked by hand on DGX A100 nodes: a tp group of 8 inside a node rides NVSwitch at 300 GB/s, the same
// group spread over two nodes by the axis order shares the nodes' NICs; the α–β formulas of each
// collective; an impossible placement is an exit-2 error.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "planner/calibrate.h"
#include "planner/collective_time.h"
#include "planner/group_links.h"
#include "unity_id.h"

namespace sp::planner {
namespace {
namespace SP_TEST_ID {

ClusterSpec dgx_a100(int nodes, const std::string& order = "tp-dp-pp") {
  const std::string dir = std::getenv("SP_SOURCE_DIR")
                              ? std::string(std::getenv("SP_SOURCE_DIR"))
                              : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
  auto c = load_cluster(dir + "/configs/clusters", "dgx-a100");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  ClusterSpec s = *with_nodes(*c, nodes);
  s.axis_order = order;
  return s;
}

GroupLink link_of(const ClusterSpec& c, int dp, int tp, int pp, comm::Axis axis,
                  HopPattern pattern = HopPattern::kRing) {
  auto grid = place_on_cluster(c, dp, tp, pp);
  EXPECT_TRUE(grid.ok()) << grid.status().to_string();
  return axis_link(c, *grid, axis, pattern);
}

TEST(PlanLinks, TensorParallelInsideANodeVsAcrossNodes) {
  // dp 2 × tp 8 on 2 nodes, order tp-dp-pp: tp group d = ranks 8d..8d+7 = one node.
  const ClusterSpec inside = dgx_a100(2);
  const GroupLink tp_in = link_of(inside, 2, 8, 1, comm::Axis::kTp);
  EXPECT_FALSE(tp_in.crosses_nodes);
  EXPECT_EQ(tp_in.link, "intra-node nvswitch");
  EXPECT_EQ(tp_in.bandwidth_bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(tp_in.latency_s, 3.4e-6);
  EXPECT_EQ(tp_in.nodes_spanned, 1);
  // The dp groups {r, r+8}: each of the 8 rings has one hop leaving each node, so the 8 NICs
  // (200 GB/s per node) are shared by 8 hops: 25 GB/s per hop.
  const GroupLink dp = link_of(inside, 2, 8, 1, comm::Axis::kDp);
  EXPECT_TRUE(dp.crosses_nodes);
  EXPECT_EQ(dp.flows_per_node, 8);
  EXPECT_DOUBLE_EQ(dp.bandwidth_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(dp.latency_s, 9.6e-6);
  EXPECT_EQ(dp.link, "inter-node infiniband");

  // Order dp-tp-pp: rank = dp + 2·tp, so tp group d = {d, d+2, ..., d+14}: tp ranks 0-3 on node 0,
  // 4-7 on node 1. Each of the 2 rings leaves each node once (3→4 and 7→0): 2 hops per node share
  // 200 GB/s = 100 GB/s, below NVSwitch's 300, so the ring runs at 100 GB/s with the network's latency.
  const ClusterSpec across = dgx_a100(2, "dp-tp-pp");
  const GroupLink tp_out = link_of(across, 2, 8, 1, comm::Axis::kTp);
  EXPECT_TRUE(tp_out.crosses_nodes);
  EXPECT_EQ(tp_out.nodes_spanned, 2);
  EXPECT_EQ(tp_out.members_per_node, 4);
  EXPECT_EQ(tp_out.flows_per_node, 2);
  EXPECT_DOUBLE_EQ(tp_out.bandwidth_bytes_per_s, 100e9);
  EXPECT_DOUBLE_EQ(tp_out.latency_s, 9.6e-6);

  // The same all-reduce (one micro-batch's b·s·h fp16 activations, 2·2048·12288·2 bytes) costs more across.
  const double S = 2.0 * 2048 * 12288 * 2;
  const double in = collective_seconds(Collective::kAllReduce, S, tp_in);
  const double out = collective_seconds(Collective::kAllReduce, S, tp_out);
  EXPECT_DOUBLE_EQ(in, 2 * 7 * 3.4e-6 + 2.0 * 7 / 8 * S / 300e9);
  EXPECT_DOUBLE_EQ(out, 2 * 7 * 9.6e-6 + 2.0 * 7 / 8 * S / 100e9);
  EXPECT_GT(out, 2.9 * in);
}

TEST(PlanLinks, PipelineHopsAreAChainNotARing) {
  // pp 2 × tp 8 on 2 nodes: pp groups {r, r+8}. As a chain only the hop node 0 → node 1 exists:
  // 8 hops leave node 0, none leave node 1; as a ring both nodes would see 8.
  const ClusterSpec c = dgx_a100(2);
  const GroupLink chain = link_of(c, 1, 8, 2, comm::Axis::kPp, HopPattern::kChain);
  EXPECT_EQ(chain.flows_per_node, 8);
  EXPECT_DOUBLE_EQ(chain.bandwidth_bytes_per_s, 25e9);
  EXPECT_DOUBLE_EQ(collective_seconds(Collective::kSendRecv, 1e6, chain), 9.6e-6 + 1e6 / 25e9);
  // tp 4 × pp 4 on 2 nodes (order tp-dp-pp): stages 0, 1 on node 0 and 2, 3 on node 1; in each of the 4
  // pp groups only the hop stage 1 → 2 crosses: 4 hops leave node 0, 200 / 4 = 50 GB/s each.
  const GroupLink pp4 = link_of(c, 1, 4, 4, comm::Axis::kPp, HopPattern::kChain);
  EXPECT_EQ(pp4.flows_per_node, 4);
  EXPECT_DOUBLE_EQ(pp4.bandwidth_bytes_per_s, 50e9);
}

TEST(PlanLinks, CollectiveFormulas) {
  GroupLink l;
  l.group_size = 4;
  l.bandwidth_bytes_per_s = 10e9;
  l.all_to_all_bandwidth_bytes_per_s = 5e9;
  l.latency_s = 2e-6;
  const double S = 8e6;
  EXPECT_DOUBLE_EQ(collective_seconds(Collective::kAllReduce, S, l), 6 * 2e-6 + 1.5 * S / 10e9);
  EXPECT_DOUBLE_EQ(collective_seconds(Collective::kReduceScatter, S, l), 3 * 2e-6 + 0.75 * S / 10e9);
  EXPECT_DOUBLE_EQ(collective_seconds(Collective::kAllGather, S, l), 3 * 2e-6 + 0.75 * S / 10e9);
  EXPECT_DOUBLE_EQ(collective_seconds(Collective::kAllToAll, S, l), 3 * 2e-6 + 0.75 * S / 5e9);
  EXPECT_DOUBLE_EQ(collective_seconds(Collective::kSendRecv, S, l), 2e-6 + S / 10e9);
  // Reduce-scatter + all-gather is the all-reduce (the ring all-reduce is exactly those two phases).
  EXPECT_DOUBLE_EQ(
      collective_seconds(Collective::kReduceScatter, S, l) + collective_seconds(Collective::kAllGather, S, l),
      collective_seconds(Collective::kAllReduce, S, l));
  GroupLink one;
  EXPECT_EQ(collective_seconds(Collective::kAllReduce, S, one), 0.0);
  EXPECT_FALSE(time_model_assumptions().empty());
}

TEST(PlanLinks, AllToAllSharesTheNodesNics) {
  // dp 16 on 2 nodes (tp = pp = 1): one dp group of 16 spanning both nodes; in an all-to-all all 8
  // members of each node send off-node at once: 200 GB/s / 8 = 25 GB/s each. The ring has 1 hop
  // leaving each node: 200 GB/s, capped by the 300 GB/s NVSwitch hops → 200.
  const ClusterSpec c = dgx_a100(2);
  const GroupLink dp = link_of(c, 16, 1, 1, comm::Axis::kDp);
  EXPECT_EQ(dp.flows_per_node, 1);
  EXPECT_DOUBLE_EQ(dp.bandwidth_bytes_per_s, 200e9);
  EXPECT_DOUBLE_EQ(dp.all_to_all_bandwidth_bytes_per_s, 25e9);
}

TEST(PlanLinks, PcieBoxIsBoundByPcie) {
  const std::string dir = std::getenv("SP_SOURCE_DIR")
                              ? std::string(std::getenv("SP_SOURCE_DIR"))
                              : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
  auto pcie = load_cluster(dir + "/configs/clusters", "pcie-a100x8");
  ASSERT_TRUE(pcie.ok());
  const GroupLink tp = link_of(*pcie, 1, 8, 1, comm::Axis::kTp);
  EXPECT_EQ(tp.link, "intra-node pcie");
  EXPECT_DOUBLE_EQ(tp.bandwidth_bytes_per_s, 31.5e9);
  EXPECT_DOUBLE_EQ(tp.latency_s, 5.7e-6);
}

TEST(PlanLinks, CalibrationFitRecoversAlphaAndBeta) {
  // One-way times generated by α = 5 us, B = 10 GB/s: the fit must give them back.
  std::vector<TransferSample> s;
  for (int64_t bytes : {8, 1024, 65536, 262144, 1048576, 4194304}) s.push_back({bytes, 5e-6 + bytes / 10e9});
  auto ab = fit_alpha_beta(s);
  ASSERT_TRUE(ab.ok()) << ab.status().to_string();
  EXPECT_NEAR(ab->bandwidth_bytes_per_s / 10e9, 1.0, 1e-9);
  EXPECT_NEAR(ab->latency_s, 5e-6, 1e-12);
  // Too few large messages, or time falling with size: refused, not a made-up link.
  EXPECT_FALSE(fit_alpha_beta({{8, 1e-6}, {65536, 2e-6}}).ok());
  EXPECT_FALSE(fit_alpha_beta({{65536, 2e-5}, {1048576, 1e-5}}).ok());
  // The sgemm probe measures something (n = 64, a few repetitions).
  const GemmMeasurement g = measure_sgemm(64, 0.001);
  EXPECT_GE(g.repetitions, 3);
  EXPECT_GT(g.gflops, 0.0);
}

TEST(PlanLinks, ImpossiblePlacementIsAUsageError) {
  const ClusterSpec c = dgx_a100(2);
  auto g = place_on_cluster(c, 3, 8, 1);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().exit_code(), 2);
  EXPECT_NE(g.status().message().find("impossible placement: dp 3 × tp 8 × pp 1 = 24 ranks, but cluster 'dgx-a100' "
                                      "has nodes 2 × devices_per_node 8 = 16 devices"),
            std::string::npos)
      << g.status().message();
  EXPECT_NE(g.status().hint().find("--nodes 3"), std::string::npos) << g.status().hint();
}

// A plan may use fewer devices than the cluster has (issue 31 item 12): the ranks fill the first devices
// by slot, as `mpirun -np 3` on a bigger allocation does.
TEST(PlanLinks, FewerRanksThanDevicesFillTheFirstDevices) {
  const ClusterSpec c = dgx_a100(2);
  auto odd = place_on_cluster(c, 1, 3, 1);
  ASSERT_TRUE(odd.ok()) << odd.status().to_string();
  EXPECT_EQ(odd->world_size(), 3);
  const GroupLink tp = axis_link(c, *odd, comm::Axis::kTp, HopPattern::kRing);
  EXPECT_FALSE(tp.crosses_nodes);
  EXPECT_EQ(tp.link, "intra-node nvswitch");
  // 12 ranks: the first node full, 4 ranks on the second; a dp ring of 12 crosses both.
  auto twelve = place_on_cluster(c, 12, 1, 1);
  ASSERT_TRUE(twelve.ok());
  EXPECT_TRUE(axis_link(c, *twelve, comm::Axis::kDp, HopPattern::kRing).crosses_nodes);
}

// A run across hosts is priced where its ranks ran (issue 47): two hosts of two devices, a tp 2 run whose ranks
// mpirun put one per host (--map-by node) has its tp ring on the network, the same run with both on one host in
// shared memory — although by slot both ranks would sit on node 0 either way.
TEST(PlanLinks, RecordedHostsPlaceTheRanks) {
  ClusterSpec c = dgx_a100(2);
  c.devices_per_node = 2;
  c.inter->nics_per_node = 1;
  c.inter->nic_bandwidth_bytes_per_s = 12.5e6;  // 100 Mbit/s
  auto within = with_rank_hosts(c, {"h0", "h0"});
  auto across = with_rank_hosts(c, {"h0", "h1"});
  ASSERT_TRUE(within.ok() && across.ok()) << across.status().to_string();
  EXPECT_EQ(across->rank_nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(across->node_hosts, (std::vector<std::string>{"h0", "h1"}));
  auto grid = place_on_cluster(*across, 1, 2, 1);
  ASSERT_TRUE(grid.ok()) << grid.status().to_string();
  const GroupLink tp_across = axis_link(*across, *grid, comm::Axis::kTp, HopPattern::kRing);
  EXPECT_TRUE(tp_across.crosses_nodes);
  // The ring 0 → 1 → 0 leaves each node once: the one NIC is that hop's.
  EXPECT_DOUBLE_EQ(tp_across.bandwidth_bytes_per_s, 12.5e6);
  const GroupLink tp_within = axis_link(*within, *grid, comm::Axis::kTp, HopPattern::kRing);
  EXPECT_FALSE(tp_within.crosses_nodes);
  EXPECT_EQ(tp_within.bandwidth_bytes_per_s, c.intra.bandwidth_bytes_per_s);
  // dp 2 × tp 2 by slot on two hosts (ranks 0, 1 on h0): tp inside, dp across with two rings leaving each node
  // over its one NIC.
  auto slots = with_rank_hosts(c, {"h0", "h0", "h1", "h1"});
  ASSERT_TRUE(slots.ok());
  auto g4 = place_on_cluster(*slots, 2, 2, 1);
  ASSERT_TRUE(g4.ok());
  EXPECT_FALSE(axis_link(*slots, *g4, comm::Axis::kTp, HopPattern::kRing).crosses_nodes);
  const GroupLink dp = axis_link(*slots, *g4, comm::Axis::kDp, HopPattern::kRing);
  EXPECT_TRUE(dp.crosses_nodes);
  EXPECT_DOUBLE_EQ(dp.bandwidth_bytes_per_s, 12.5e6 / 2);
  // The recorded placement fixes the world: another degree is refused, naming both.
  auto other = place_on_cluster(*slots, 1, 2, 1);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("recorded placement"), std::string::npos) << other.status().message();
}

// A run on more hosts than the cluster has nodes, or more ranks on a host than a node has devices, is refused
// naming both sides, with the calibration that would fit; a cluster without a network cannot hold two hosts.
TEST(PlanLinks, RecordedHostsMustFitTheCluster) {
  ClusterSpec c = dgx_a100(2);
  c.devices_per_node = 2;
  auto three = with_rank_hosts(c, {"a", "b", "c"});
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(three.status().message().find("3 hosts (a, b, c)"), std::string::npos) << three.status().message();
  EXPECT_NE(three.status().hint().find("plan calibrate"), std::string::npos) << three.status().hint();
  auto crowded = with_rank_hosts(c, {"a", "a", "a"});
  ASSERT_FALSE(crowded.ok());
  EXPECT_NE(crowded.status().message().find("at most 3 on one host"), std::string::npos) << crowded.status().message();
  ClusterSpec no_network = c;  // two nodes without a network: what the parser refuses, built by hand
  no_network.inter.reset();
  auto no_net = with_rank_hosts(no_network, {"a", "b"});
  ASSERT_FALSE(no_net.ok());
  EXPECT_NE(no_net.status().message().find("no [inter_node]"), std::string::npos) << no_net.status().message();
}

// `plan calibrate` across hosts (calibrate.h): a calibration of 2 hosts × 2 ranks becomes a cluster of 2 nodes
// of 2 devices whose network is the inter-host exchange's bandwidth and the inter-host ping-pong's latency, and
// whose file reads back as written.
TEST(PlanLinks, CalibrationAcrossHostsWritesTheNetwork) {
  Calibration cal;
  cal.ranks = 4;
  cal.host = "h0";
  cal.hosts = {"h0", "h1"};
  cal.ranks_per_host = 2;
  cal.cpu_model = "test CPU";
  cal.host_memory_bytes = 8e9;
  cal.gflops_per_rank = {50, 50, 50, 50};
  cal.link = {.latency_s = 1e-6, .bandwidth_bytes_per_s = 5e9};
  cal.exchange = {.latency_s = 2e-6, .bandwidth_bytes_per_s = 3e9};
  cal.inter_link = {.latency_s = 40e-6, .bandwidth_bytes_per_s = 40e6};
  cal.inter_exchange = {.latency_s = 60e-6, .bandwidth_bytes_per_s = 36e6};
  const ClusterSpec s = this_host_cluster(cal, "2026-01-01T00:00:00Z");
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.devices_per_node, 2);
  EXPECT_DOUBLE_EQ(s.device_memory_bytes, 4e9);
  EXPECT_DOUBLE_EQ(s.intra.bandwidth_bytes_per_s, 3e9);
  ASSERT_TRUE(s.inter.has_value());
  EXPECT_EQ(s.inter->kind, NetworkKind::kEthernet);
  EXPECT_EQ(s.inter->nics_per_node, 1);
  EXPECT_DOUBLE_EQ(s.inter->nic_bandwidth_bytes_per_s, 36e6);
  EXPECT_DOUBLE_EQ(s.inter->latency_s, 40e-6);
  auto back = parse_cluster(cluster_to_toml(s, calibration_comment(cal, "2026-01-01T00:00:00Z")), "hosts.toml");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->nodes, 2);
  EXPECT_NEAR(back->inter->nic_bandwidth_bytes_per_s / 36e6, 1.0, 1e-6);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::planner
