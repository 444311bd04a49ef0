// `plan calibrate`'s measurements on real MPI ranks (planner/calibrate.h): every rank gets the same result,
// the sgemm rate and the fitted link are physically plausible for one CPU core and shared memory, and the
// cluster file written from them reads back as this host (one node of `world` devices, link "shm").
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "comm/mpi_communicator.h"
#include "planner/calibrate.h"
#include "planner/kernel_costs.h"

namespace sp::planner {
namespace {

TEST(PlanCalibrate, MeasuresAndWritesThisHost) {
  auto world = comm::make_world_communicator();
  CalibrationOptions o;
  o.gemm_n = 256;
  o.gemm_seconds = 0.05;
  o.repetitions = 5;
  o.kernels.gemm_sizes = {32, 128};
  o.kernels.gemm_tokens = {32, 128};
  o.kernels.gemm_widths = {32, 64};
  o.kernels.attention_seq = {64, 128};
  o.kernels.activation_bytes = {1 << 16, 1 << 18};
  o.kernels.parameter_bytes = {1 << 16, 1 << 18};
  o.kernels.min_seconds = 0.005;
  auto c = calibrate_this_host(*world, "testhost", o);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->ranks, world->size());
  ASSERT_EQ(c->gflops_per_rank.size(), static_cast<size_t>(world->size()));
  // A core does more than 0.5 GFLOP/s of sgemm and less than 10 TFLOP/s.
  for (double g : c->gflops_per_rank) {
    EXPECT_GT(g, 0.5);
    EXPECT_LT(g, 1e4);
  }
  // Shared-memory MPI: above 10 MB/s, below 1 TB/s; latency below 0.1 s even when ranks share busy cores
  // (scheduling delays of a few milliseconds were seen under `make test`-like load).
  EXPECT_GT(c->link.bandwidth_bytes_per_s, 1e7);
  EXPECT_LT(c->link.bandwidth_bytes_per_s, 1e12);
  EXPECT_GE(c->link.latency_s, 0.0);
  EXPECT_LT(c->link.latency_s, 0.1);
  ASSERT_EQ(c->samples.size(), o.sizes.size());
  // 64 MiB takes longer than 8 bytes whatever the load: at 10 GB/s it alone is 6.7 ms.
  EXPECT_GT(c->samples.back().one_way_seconds, c->samples.front().one_way_seconds);
  EXPECT_GE(c->load_average, 0.0);
  EXPECT_GE(c->cores, 1);

  // Every rank holds the same result: compare the fitted numbers bit for bit across ranks.
  double mine[2] = {c->link.bandwidth_bytes_per_s, c->link.latency_s};
  double lo[2], hi[2];
  std::memcpy(lo, mine, sizeof mine);
  std::memcpy(hi, mine, sizeof mine);
  world->all_reduce(lo, 2, DType::kF64, comm::ReduceOp::kMin);
  world->all_reduce(hi, 2, DType::kF64, comm::ReduceOp::kMax);
  EXPECT_EQ(lo[0], hi[0]);
  EXPECT_EQ(lo[1], hi[1]);

  const ClusterSpec s = this_host_cluster(*c, "2026-01-01T00:00:00Z");
  auto back = parse_cluster(cluster_to_toml(s, calibration_comment(*c, "2026-01-01T00:00:00Z")), "this-host.toml");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->name, "this-host");
  EXPECT_EQ(back->nodes, 1);
  EXPECT_EQ(back->devices_per_node, world->size());
  EXPECT_EQ(back->intra.kind, LinkKind::kSharedMemory);
  EXPECT_FALSE(back->inter.has_value());
  EXPECT_GT(back->peak_flops.at("fp32"), 0.5e9);
  // The link's bandwidth is the exchange's (both directions at once, as a collective's steps run); its
  // latency the ping-pong's.
  ASSERT_EQ(c->exchange_samples.size(), o.sizes.size());
  EXPECT_GT(c->exchange_samples.back().one_way_seconds, c->exchange_samples.front().one_way_seconds);
  EXPECT_GT(c->exchange.bandwidth_bytes_per_s, 1e7);
  EXPECT_NEAR(back->intra.bandwidth_bytes_per_s / c->exchange.bandwidth_bytes_per_s, 1.0, 1e-12);
  EXPECT_NEAR(back->intra.latency_s, c->link.latency_s, 1e-12);
  // The time model's rates: an fp32 GEMM curve whose largest point is the fp32 peak, attention and every
  // memory family, read back as written.
  ASSERT_TRUE(back->measured.gemm_efficiency.count("fp32"));
  const Curve& e = back->measured.gemm_efficiency.at("fp32");
  EXPECT_EQ(e.x.size(), 2u);
  // At most 1: the peak may be a linear product's rate (below), which a loaded machine can make the fastest.
  for (double v : e.y) EXPECT_LE(v, 1.0 + 1e-12);
  // A linear's three products per dtype over tokens × weights, read back as written; the peak is the largest
  // rate of the n×n×n products and the linear products together, so no efficiency exceeds 1 and one is 1.
  ASSERT_TRUE(back->measured.gemm_form_efficiency.count("fp32"));
  double largest = *std::max_element(e.y.begin(), e.y.end());
  for (const auto& [d, forms] : back->measured.gemm_form_efficiency) {
    ASSERT_EQ(forms.size(), std::size(kGemmForms)) << d;
    for (const auto& [f, g] : forms) {
      EXPECT_EQ(g.x, (std::vector<double>{32, 128})) << d;
      EXPECT_EQ(g.y, (std::vector<double>{32 * 32, 64 * 64})) << d;
      ASSERT_EQ(g.z.size(), 4u) << d << " " << gemm_form_name(f);
      for (double v : g.z) EXPECT_LE(v, 1.0) << d << " " << gemm_form_name(f);
      if (d == "fp32") largest = std::max(largest, *std::max_element(g.z.begin(), g.z.end()));
      const Grid& written = s.measured.gemm_form_efficiency.at(d).at(f);
      for (size_t i = 0; i < g.z.size(); ++i) EXPECT_NEAR(g.z[i] / written.z[i], 1.0, 1e-5);
    }
  }
  EXPECT_NEAR(largest, 1.0, 1e-5);
  // The planner prices a linear's products each at its own form's measured grid (kernel_costs.h), not at the
  // n×n×n curve: the wgrad dW (64, 32) += dYᵀ (64, 128) · X (128, 32) at (128 tokens, 64·32 weights).
  const double peak = back->peak_flops.at("fp32");
  const Grid& wgrad = back->measured.gemm_form_efficiency.at("fp32").at(GemmForm::kWgrad);
  const KernelCall dw{.kind = KernelCall::Kind::kGemm, .form = GemmForm::kWgrad, .m = 64, .n = 32, .k = 128};
  const KernelTimes t = price_kernels({dw}, back->measured, "fp32", peak, 0.5);
  EXPECT_NEAR(t.gemm / (2.0 * 64 * 32 * 128 / (peak * wgrad.at(128, 64 * 32))), 1.0, 1e-12);
  EXPECT_EQ(t.wgrad, t.gemm);
  EXPECT_TRUE(back->measured.attention_forward_s.count("fp32"));
  EXPECT_EQ(back->measured.bandwidth.size(), std::size(kMemoryFamilies));
  for (const auto& [f, curve] : back->measured.bandwidth)
    for (double bw : curve.y) EXPECT_GT(bw, 1e7) << memory_family_name(f);  // above 10 MB/s on any CPU
}

}  // namespace
}  // namespace sp::planner
