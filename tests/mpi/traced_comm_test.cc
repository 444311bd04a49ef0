// A miniature training step on every grid with all communicators traced (TracedCommunicator +
// TraceWriter + Watchdog + topology.json), then the trace checker over the run directory:
//   * the honest run is consistent and its traffic per (group, step, phase) equals the closed form
//     of what the step sends (the gate compares exactly these sums with the ledger's prediction);
//   * a desynchronized run, where the last rank issues one extra all_reduce, is named by the
//     checker: group "world", the seq of the extra op, the rank(s) and the field "op".
// The extra all_reduce has count 0, so MPI is never called for it and the run itself cannot hang.
#include <gtest/gtest.h>

#include <filesystem>

#include "comm/deterministic.h"
#include "comm/topology.h"
#include "comm/trace_writer.h"
#include "comm/traced_communicator.h"
#include "comm/watchdog.h"
#include "evidence/trace_check.h"
#include "mpi_test_util.h"

namespace sp::comm {
namespace {

// What one rank does in one step; `extra` makes it issue one extra world all_reduce.
void mini_step(GridCommunicators& comms, TraceContext& ctx, bool extra) {
  Communicator& tp = *comms.tp;
  Communicator& pp = *comms.pp;
  Communicator& dp = *comms.dp;
  Communicator& world = *comms.world;
  {
    ScopedPhase phase(ctx, Phase::kSetup, -1);
    int64_t seed = 42;
    world.broadcast(&seed, 1, DType::kI64, 0);
  }
  const int stage = pp.rank(), stages = pp.size();
  std::vector<float> act(8, 1.0f), grad(8, 0.5f), partial(12, 0.25f);
  for (int mb = 0; mb < 2; ++mb) {
    ScopedPhase phase(ctx, Phase::kForward, 0, mb);
    if (stage > 0) pp.recv(act.data(), 8, DType::kF32, stage - 1, mb);
    tp.all_reduce(partial.data(), 12, DType::kF32, ReduceOp::kSum);
    if (stage + 1 < stages) pp.send(act.data(), 8, DType::kF32, stage + 1, mb);
  }
  for (int mb = 1; mb >= 0; --mb) {
    ScopedPhase phase(ctx, Phase::kBackward, 0, mb);
    if (stage + 1 < stages) {
      auto r = pp.irecv(grad.data(), 8, DType::kF32, stage + 1, 100 + mb);
      r->wait();
    }
    if (stage > 0) pp.isend(grad.data(), 8, DType::kF32, stage - 1, 100 + mb)->wait();
  }
  {
    ScopedPhase phase(ctx, Phase::kGradSync, 0);
    std::vector<float> g(10, 1.0f), scratch(static_cast<size_t>(deterministic_all_reduce_scratch(10, dp.size())));
    deterministic_all_reduce(dp, f32_view(g.data(), 10), f32_view(scratch.data(), std::ssize(scratch)));
    // The same reduction twice more, non-blocking and both in flight (comm/deterministic.h PendingReduction):
    // posted, polled, advanced in order, completed; traced as the same ops, written at completion.
    std::vector<float> h(10, 1.0f), k(10, 1.0f), s2(scratch.size()), s3(scratch.size());
    auto a = PendingReduction::start_all_reduce(dp, f32_view(h.data(), 10), f32_view(s2.data(), std::ssize(s2)));
    auto b = PendingReduction::start_all_reduce(dp, f32_view(k.data(), 10), f32_view(s3.data(), std::ssize(s3)));
    (void)a->test();
    a->advance();
    b->advance();
    b->wait();
    a->wait();
    EXPECT_TRUE(a->done() && b->done());
    EXPECT_EQ(h, g);
    EXPECT_EQ(k, g);
  }
  {
    ScopedPhase phase(ctx, Phase::kOptimizer, 0);
    double norm = 1.0;
    world.all_reduce(&norm, 1, DType::kF64, ReduceOp::kMax);
  }
  {
    ScopedPhase phase(ctx, Phase::kEvidence, 0);
    if (extra) world.all_reduce(nullptr, 0, DType::kF32, ReduceOp::kSum);
    double loss = 2.0;
    std::vector<double> losses(static_cast<size_t>(world.size()));
    world.gather(&loss, 1, world.rank() == 0 ? losses.data() : nullptr,
                 std::vector<int64_t>(static_cast<size_t>(world.size()), 1), DType::kF64, 0);
  }
}

// Runs mini_step traced into a fresh directory; returns the directory (same on every rank).
std::string traced_run(const ProcessGrid& grid, const std::string& tag, int deviant) {
  auto world = make_world_communicator();
  const std::string dir = test::shared_temp_dir(*world, tag);
  const int me = world->rank();
  auto writer = TraceWriter::open(dir, me);
  EXPECT_TRUE(writer.ok()) << writer.status().to_string();
  Watchdog watchdog(60.0, writer->get());
  TraceContext ctx;
  GridCommunicators comms = make_grid_communicators(grid);
  trace_communicators(comms, ctx, writer->get(), &watchdog);
  EXPECT_TRUE(write_topology(*comms.world, grid, dir).ok());
  mini_step(comms, ctx, me == deviant);
  EXPECT_TRUE((*writer)->status().ok());
  world->barrier();  // untraced: every rank's file is complete before rank 0 reads them
  return dir;
}

TEST(TracedRun, HonestRunIsConsistentWithClosedFormTraffic) {
  auto probe = make_world_communicator();
  for (const auto& [dp, tp, pp] : test::grids_for_world(probe->size())) {
    SCOPED_TRACE(test::grid_label({dp, tp, pp}));
    const ProcessGrid grid = *ProcessGrid::create(dp, tp, pp, ProcessGrid::kDefaultOrder, probe->size());
    const std::string dir = traced_run(grid, "traced_ok", -1);
    if (probe->rank() == 0) {
      const Result<evidence::TraceReport> report = evidence::check_trace_dir(dir);
      ASSERT_TRUE(report.ok()) << report.status().to_string();
      EXPECT_TRUE(report->consistent()) << report->summary();
      EXPECT_TRUE(report->topology_found);
      EXPECT_TRUE(report->warnings.empty());
      auto traffic = [&](const std::string& group, int64_t step, Phase phase) {
        const auto it = report->traffic.find(evidence::TrafficKey{group, step, phase});
        return it == report->traffic.end() ? evidence::Traffic{} : it->second;
      };
      for (int first_rank = 0; first_rank < grid.world_size(); ++first_rank) {
        const Coords c = grid.coords_of(first_rank);
        if (c.dp == 0) {
          // Three deterministic all-reduces of 10 F32 over D ranks (one blocking, two not): all_to_all (40 B in)
          // + all_gather (40 B out), each ⌊(D−1)·40/D⌋ on the wire, per rank.
          const int64_t d = dp;
          const evidence::Traffic t = traffic(grid.group_name(Axis::kDp, first_rank), 0, Phase::kGradSync);
          EXPECT_EQ(t.ops, 3 * 2 * d);
          EXPECT_EQ(t.bytes, 3 * d * 80);
          EXPECT_EQ(t.wire_bytes, 3 * d * 2 * ((d - 1) * 40 / d));
        }
        if (c.tp == 0) {
          // Two micro-batches × all_reduce of 12 F32 (48 B, wire ⌊2(T−1)·48/T⌋) per rank.
          const int64_t t_size = tp;
          const evidence::Traffic t = traffic(grid.group_name(Axis::kTp, first_rank), 0, Phase::kForward);
          EXPECT_EQ(t.ops, 2 * t_size);
          EXPECT_EQ(t.bytes, t_size * 96);
          EXPECT_EQ(t.wire_bytes, t_size * 2 * (2 * (t_size - 1) * 48 / t_size));
        }
        if (c.pp == 0) {
          // Forward: P−1 sends and P−1 recvs of 8 F32 per micro-batch; backward the same, reversed.
          const int64_t p = pp;
          for (Phase phase : {Phase::kForward, Phase::kBackward}) {
            const evidence::Traffic t = traffic(grid.group_name(Axis::kPp, first_rank), 0, phase);
            EXPECT_EQ(t.ops, 2 * 2 * (p - 1));
            EXPECT_EQ(t.bytes, 2 * 2 * (p - 1) * 32);
            EXPECT_EQ(t.wire_bytes, t.bytes);
          }
        }
      }
      const int64_t n = grid.world_size();
      EXPECT_EQ(traffic("world", 0, Phase::kEvidence).bytes, n * n * 8);  // gather: Σcounts on every rank
      std::filesystem::remove_all(dir);
    }
    probe->barrier();
  }
}

TEST(TracedRun, ExtraCollectiveOnOneRankIsNamedByTheChecker) {
  auto probe = make_world_communicator();
  const int n = probe->size();
  const ProcessGrid grid = *ProcessGrid::create(n, 1, 1, ProcessGrid::kDefaultOrder, n);
  const std::string dir = traced_run(grid, "traced_desync", n - 1);
  if (probe->rank() == 0) {
    const Result<evidence::TraceReport> report = evidence::check_trace_dir(dir);
    ASSERT_TRUE(report.ok()) << report.status().to_string();
    ASSERT_FALSE(report->consistent());
    const evidence::TraceMismatch& m = report->mismatches.front();
    EXPECT_EQ(m.kind, "field") << m.message;
    EXPECT_EQ(m.group, "world");
    // World ops before the extra one: write_topology's all_gather, gather and broadcast (seq 0–2),
    // the setup broadcast (seq 3), the optimizer's all_reduce (seq 4); the extra all_reduce is seq 5.
    EXPECT_EQ(m.seq, 5) << m.message;
    EXPECT_EQ(m.field, "op");
    EXPECT_NE(m.expected.find("gather"), std::string::npos) << m.expected;
    EXPECT_NE(m.actual.find(fmt::format("all_reduce on rank {}", n - 1)), std::string::npos) << m.actual;
    // With a majority the odd rank alone is named; with two ranks there is none, so both are.
    EXPECT_EQ(m.ranks, (n > 2 ? std::vector<int>{n - 1} : std::vector<int>{0, 1}));
    EXPECT_NE(report->summary().find("group 'world' seq 5: op differs"), std::string::npos) << report->summary();
    std::filesystem::remove_all(dir);
  }
  probe->barrier();
}

TEST(TracedRun, TracingOffWritesNothingAndStillComputes) {
  auto world = make_world_communicator();
  const ProcessGrid grid = *ProcessGrid::create(world->size(), 1, 1, ProcessGrid::kDefaultOrder, world->size());
  TraceContext ctx;
  Watchdog watchdog(60.0, nullptr);
  GridCommunicators comms = make_grid_communicators(grid);
  trace_communicators(comms, ctx, nullptr, &watchdog);
  int64_t x = comms.world->rank() + 1;
  comms.world->all_reduce(&x, 1, DType::kI64, ReduceOp::kSum);
  EXPECT_EQ(x, int64_t{world->size()} * (world->size() + 1) / 2);
  mini_step(comms, ctx, false);
  EXPECT_FALSE(static_cast<TracedCommunicator&>(*comms.world).tracing());
}

}  // namespace
}  // namespace sp::comm
