// `plan calibrate` across hosts on real MPI ranks (planner/calibrate_hosts.h, calibrate.h), with the host
// names handed in by the test (the namespace hosts of tests/multihost run it on real ones): 4 ranks on hosts
// h0, h0, h1, h1 calibrate as 2 nodes of 2 devices with a network measured between ranks 0 and 2; ranks not
// placed by slot, or one per host, are refused with the same message on every rank, before any measurement.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "comm/mpi_communicator.h"
#include "planner/calibrate.h"
#include "planner/calibrate_hosts.h"

namespace sp::planner {
namespace {

CalibrationOptions quick() {
  CalibrationOptions o;
  o.gemm_n = 128;
  o.gemm_seconds = 0.02;
  o.repetitions = 3;
  o.sizes = {8, 65536, 1048576};
  o.measure_kernels = false;
  return o;
}

// Every rank's message, gathered: the refusal must read the same on all of them.
bool same_on_every_rank(comm::Communicator& world, const std::string& text) {
  std::vector<char> mine(512, '\0'), all(512 * static_cast<size_t>(world.size()), '\0');
  std::memcpy(mine.data(), text.data(), std::min<size_t>(text.size(), 511));
  world.all_gather(mine.data(), all.data(), std::vector<int64_t>(static_cast<size_t>(world.size()), 512), DType::kU8);
  for (int r = 1; r < world.size(); ++r)
    if (std::memcmp(all.data(), all.data() + 512 * r, 512) != 0) return false;
  return true;
}

TEST(PlanCalibrateHosts, TwoHostsOfTwoRanksBecomeTwoNodes) {
  auto world = comm::make_world_communicator();
  ASSERT_EQ(world->size(), 4) << "run at 4 ranks";
  const std::string host = "h" + std::to_string(world->rank() / 2);
  auto placed = gather_rank_hosts(*world, host);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_EQ(placed->hosts, (std::vector<std::string>{"h0", "h1"}));
  EXPECT_EQ(placed->ranks_per_host, 2);
  EXPECT_EQ(placed->intra_peer(), 1);
  EXPECT_EQ(placed->inter_peer(), 2);
  auto c = calibrate_this_host(*world, host, quick());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->hosts, (std::vector<std::string>{"h0", "h1"}));
  EXPECT_EQ(c->ranks_per_host, 2);
  EXPECT_EQ(c->inter_samples.size(), 3u);
  EXPECT_GT(c->inter_exchange.bandwidth_bytes_per_s, 1e6);
  const ClusterSpec s = this_host_cluster(*c, "2026-01-01T00:00:00Z");
  EXPECT_EQ(s.nodes, 2);
  EXPECT_EQ(s.devices_per_node, 2);
  ASSERT_TRUE(s.inter.has_value());
  EXPECT_DOUBLE_EQ(s.inter->nic_bandwidth_bytes_per_s, c->inter_exchange.bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(s.inter->latency_s, c->inter_link.latency_s);
  // Every rank holds the same figures, bit for bit (hexadecimal floats).
  EXPECT_TRUE(
      same_on_every_rank(*world, fmt::format("{:a} {:a}", s.inter->nic_bandwidth_bytes_per_s, s.inter->latency_s)));
}

TEST(PlanCalibrateHosts, RanksNotBySlotOrAloneOnAHostAreRefused) {
  auto world = comm::make_world_communicator();
  ASSERT_EQ(world->size(), 4) << "run at 4 ranks";
  // Round robin (--map-by node): h0, h1, h0, h1.
  auto round_robin = calibrate_this_host(*world, "h" + std::to_string(world->rank() % 2), quick());
  ASSERT_FALSE(round_robin.ok());
  EXPECT_EQ(round_robin.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(round_robin.status().message().find("rank 1 on h1"), std::string::npos) << round_robin.status().message();
  EXPECT_NE(round_robin.status().hint().find("--map-by slot"), std::string::npos) << round_robin.status().hint();
  EXPECT_TRUE(same_on_every_rank(*world, round_robin.status().to_string()));
  // One rank per host: no link inside a host to measure.
  auto alone = calibrate_this_host(*world, "h" + std::to_string(world->rank()), quick());
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().hint().find("2 slots"), std::string::npos) << alone.status().hint();
  EXPECT_TRUE(same_on_every_rank(*world, alone.status().to_string()));
}

}  // namespace
}  // namespace sp::planner
