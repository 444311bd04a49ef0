// Cluster descriptions (planner/cluster.h, docs/formats/cluster.md): the bundled presets load with the
// datasheet figures converted to SI units; a description survives writing and reading back; every bad
// field is an exit-2 error naming file:line, the field and the rule, all problems at once.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "planner/cluster.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::planner {
namespace {
namespace SP_TEST_ID {

using sp::test::source_dir;
std::string presets() { return source_dir() + "/configs/clusters"; }

constexpr double kGiB = 1073741824.0;

const char* kGood = R"(name = "two-box"
description = "test cluster"
sources = ["made up for the test"]

[nodes]
count = 2
devices_per_node = 4

[device]
model = "X1"
memory_gib = 16

[device.peak_tflops]
fp32 = 10
bf16 = 100

[intra_node]
kind = "nvlink"
bandwidth_gbytes_per_s = 50
latency_us = 2

[inter_node]
kind = "roce"
nics_per_node = 2
nic_gbits_per_s = 100
latency_us = 8

[placement]
axis_order = "tp-dp-pp"
)";

// kGood with `from` replaced by `to` (the first occurrence).
std::string edited(const std::string& from, const std::string& to) {
  std::string s = kGood;
  const auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

std::string error_of(const std::string& text) {
  auto c = parse_cluster(text, "bad.toml");
  EXPECT_FALSE(c.ok());
  EXPECT_EQ(c.status().exit_code(), 2) << c.status().to_string();
  return c.status().message();
}

TEST(PlanCluster, PresetsLoadWithTheirDatasheetFigures) {
  auto a100 = load_cluster(presets(), "dgx-a100");
  ASSERT_TRUE(a100.ok()) << a100.status().to_string();
  EXPECT_EQ(a100->devices_per_node, 8);
  EXPECT_EQ(a100->device_memory_bytes, 80 * kGiB);
  EXPECT_EQ(a100->peak_flops.at("bf16"), 312e12);
  EXPECT_EQ(a100->intra.kind, LinkKind::kNvswitch);
  EXPECT_EQ(a100->intra.bandwidth_bytes_per_s, 300e9);  // 600 GB/s bidirectional
  ASSERT_TRUE(a100->inter.has_value());
  EXPECT_EQ(a100->inter->nics_per_node, 8);
  EXPECT_EQ(a100->inter->nic_bandwidth_bytes_per_s, 25e9);  // 200 Gb/s
  EXPECT_EQ(a100->inter->node_bandwidth_bytes_per_s(), 200e9);
  EXPECT_NEAR(a100->intra.latency_s, 3.4e-6, 1e-18);
  EXPECT_FALSE(a100->sources.empty());

  auto h100 = load_cluster(presets(), "dgx-h100");
  ASSERT_TRUE(h100.ok()) << h100.status().to_string();
  EXPECT_EQ(h100->intra.bandwidth_bytes_per_s, 450e9);
  EXPECT_EQ(h100->inter->nic_bandwidth_bytes_per_s, 50e9);  // 400 Gb/s NDR
  EXPECT_EQ(h100->peak_flops.at("bf16"), 989.5e12);

  auto pcie = load_cluster(presets(), "pcie-a100x8");
  ASSERT_TRUE(pcie.ok()) << pcie.status().to_string();
  EXPECT_EQ(pcie->intra.kind, LinkKind::kPcie);
  EXPECT_EQ(pcie->intra.bandwidth_bytes_per_s, 31.5e9);
  EXPECT_EQ(pcie->inter->kind, NetworkKind::kRoce);
}

TEST(PlanCluster, WriteAndReadBack) {
  auto c = parse_cluster(kGood, "good.toml");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->devices(), 8);
  EXPECT_EQ(c->node_of(5), 1);
  const std::string text = cluster_to_toml(*c, {"a comment line"});
  EXPECT_EQ(text.rfind("# a comment line\n", 0), 0u);
  auto back = parse_cluster(text, "written.toml");
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << text;
  EXPECT_EQ(back->name, c->name);
  EXPECT_EQ(back->nodes, c->nodes);
  EXPECT_EQ(back->devices_per_node, c->devices_per_node);
  EXPECT_DOUBLE_EQ(back->device_memory_bytes, c->device_memory_bytes);
  EXPECT_EQ(back->peak_flops, c->peak_flops);
  EXPECT_DOUBLE_EQ(back->intra.bandwidth_bytes_per_s, c->intra.bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(back->intra.latency_s, c->intra.latency_s);
  EXPECT_EQ(back->inter->kind, NetworkKind::kRoce);
  EXPECT_DOUBLE_EQ(back->inter->nic_bandwidth_bytes_per_s, c->inter->nic_bandwidth_bytes_per_s);
  EXPECT_EQ(back->axis_order, c->axis_order);
  // A measured, unround figure survives too.
  ClusterSpec m = *c;
  m.intra.bandwidth_bytes_per_s = 7.123456789e9;
  m.intra.latency_s = 1.2345e-7;
  auto m2 = parse_cluster(cluster_to_toml(m), "m.toml");
  ASSERT_TRUE(m2.ok());
  EXPECT_NEAR(m2->intra.bandwidth_bytes_per_s / m.intra.bandwidth_bytes_per_s, 1.0, 1e-15);
  EXPECT_NEAR(m2->intra.latency_s / m.intra.latency_s, 1.0, 1e-15);
}

TEST(PlanCluster, MissingNegativeAndUnknownFieldsNameTheFieldAndRule) {
  std::string e = error_of(edited("bandwidth_gbytes_per_s = 50\n", ""));
  EXPECT_NE(e.find("bad.toml:"), std::string::npos) << e;
  EXPECT_NE(e.find("intra_node.bandwidth_gbytes_per_s: missing field (rule: a number > 0)"), std::string::npos) << e;

  e = error_of(edited("latency_us = 2", "latency_us = -2"));
  EXPECT_NE(e.find("bad.toml:20: intra_node.latency_us = -2 must be >= 0"), std::string::npos) << e;

  e = error_of(edited("nics_per_node = 2", "nics_per_node = -1"));
  EXPECT_NE(e.find("inter_node.nics_per_node = -1 must be an integer in [1, 1024]"), std::string::npos) << e;

  e = error_of(edited("devices_per_node = 4", "devices_per_node = 4\ngpus = 4"));
  EXPECT_NE(e.find("unknown key nodes.gpus (known keys in [nodes]: count, devices_per_node)"), std::string::npos) << e;

  e = error_of(edited("bf16 = 100", "bf17 = 100"));
  EXPECT_NE(e.find("device.peak_tflops.bf17: unknown dtype"), std::string::npos) << e;

  e = error_of(edited("kind = \"nvlink\"", "kind = \"infinity-fabric\""));
  EXPECT_NE(e.find("intra_node.kind = \"infinity-fabric\" must be one of \"nvlink\", \"nvswitch\", \"pcie\", \"shm\""),
            std::string::npos)
      << e;

  e = error_of(edited("axis_order = \"tp-dp-pp\"", "axis_order = \"tp-tp-pp\""));
  EXPECT_NE(e.find("placement.axis_order = \"tp-tp-pp\" must order the axes"), std::string::npos) << e;

  e = error_of(edited("memory_gib = 16", "memory_gib = \"16\""));
  EXPECT_NE(e.find("device.memory_gib = \"16\" must be a number > 0"), std::string::npos) << e;
}

TEST(PlanCluster, MultiNodeNeedsANetworkAndEveryProblemIsListed) {
  std::string text = kGood;
  text = text.substr(0, text.find("[inter_node]")) + text.substr(text.find("[placement]"));
  std::string e = error_of(text);
  EXPECT_NE(e.find("missing table [inter_node] (rule: required when nodes.count = 2 > 1)"), std::string::npos) << e;
  // One node without a network is fine, but it cannot grow to several.
  std::string single = text;
  single.replace(single.find("count = 2"), 9, "count = 1");
  auto ok = parse_cluster(single, "single.toml");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  auto grown = with_nodes(*ok, 4);
  ASSERT_FALSE(grown.ok());
  EXPECT_EQ(grown.status().exit_code(), 2);
  EXPECT_NE(grown.status().message().find("has no [inter_node] network"), std::string::npos);

  // Three problems in one file: all three reported.
  std::string three = edited("memory_gib = 16", "memory_gib = 0");
  three.replace(three.find("latency_us = 8"), 14, "latency_us = -8");
  three.replace(three.find("count = 2"), 9, "count = 0");
  e = error_of(three);
  EXPECT_NE(e.find("3 problems"), std::string::npos) << e;
  EXPECT_NE(e.find("device.memory_gib = 0 must be > 0"), std::string::npos) << e;
  EXPECT_NE(e.find("inter_node.latency_us = -8 must be >= 0"), std::string::npos) << e;
  EXPECT_NE(e.find("nodes.count = 0 must be an integer in [1, 1048576]"), std::string::npos) << e;
}

// Issue 31 item 9: figures beyond any machine are refused by name instead of wrapping into a negative device
// memory (memory_gib = 1e30 once gave "device limit -8589934592 GiB"), and --nodes is bounded.
TEST(PlanCluster, FiguresBeyondAnyMachineAreRefusedByName) {
  std::string e = error_of(edited("memory_gib = 16", "memory_gib = 1e30"));
  EXPECT_NE(e.find("bad.toml:11: device.memory_gib = 1e+30 must be <= 1048576"), std::string::npos) << e;
  e = error_of(edited("bf16 = 100", "bf16 = 1e300"));
  EXPECT_NE(e.find("device.peak_tflops.bf16 = 1e+300 must be <= 1000000"), std::string::npos) << e;
  e = error_of(edited("latency_us = 2", "latency_us = 1e20"));
  EXPECT_NE(e.find("intra_node.latency_us = 1e+20 must be <= 1000000"), std::string::npos) << e;
  std::string huge = edited("count = 2", "count = 1048576");
  huge.replace(huge.find("devices_per_node = 4"), 20, "devices_per_node = 8");
  e = error_of(huge);
  EXPECT_NE(e.find("count 1048576 × devices_per_node 8 = 8388608 devices must be <= 1048576"), std::string::npos) << e;
  auto c = parse_cluster(kGood, "good.toml");
  ASSERT_TRUE(c.ok());
  auto big = with_nodes(*c, 8388608 / 4);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().exit_code(), 2);
  EXPECT_NE(big.status().message().find("--nodes 2097152 must be in [1, 262144]"), std::string::npos)
      << big.status().message();
  EXPECT_FALSE(with_nodes(*c, 0).ok());
  EXPECT_TRUE(with_nodes(*c, 262144).ok());
}

TEST(PlanCluster, SyntaxErrorsAndUnknownPresetsAreUsageErrors) {
  std::string e = error_of("name = \n");
  EXPECT_NE(e.find("bad.toml:1:"), std::string::npos) << e;
  auto none = load_cluster(presets(), "dgx-z9000");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().exit_code(), 2);
  EXPECT_NE(none.status().hint().find("dgx-a100"), std::string::npos) << none.status().hint();
  auto file = load_cluster(presets(), "/nonexistent/cluster.toml");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().exit_code(), 2);
  EXPECT_NE(file.status().message().find("/nonexistent/cluster.toml"), std::string::npos);
}

TEST(PlanCluster, PeakForAMissingDtypeNamesWhatTheFileGives) {
  auto c = parse_cluster(kGood, "good.toml");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c->peak_flops_for("bf16"), 100e12);
  auto fp8 = c->peak_flops_for("fp8");
  ASSERT_FALSE(fp8.ok());
  EXPECT_EQ(fp8.status().exit_code(), 2);
  EXPECT_NE(fp8.status().hint().find("bf16, fp32"), std::string::npos) << fp8.status().hint();
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::planner
