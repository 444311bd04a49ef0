// The DP sync overlapped with the backward (GradStore, parallel.overlap_buckets; docs/performance.md
// §"DP sync overlapped with the backward"), on the dp = world group, without the model: three units of odd
// sizes, k = 3 micro-batches per rank, each micro-batch's backward visiting the units last to first as the
// model does. Proven, for both reductions, ZeRO 0/1/2 and 0 to 3 syncs in flight:
//   * overlap happens: after a unit's last done() its sync is posted on the dp group and left in flight (the
//     deterministic all-reduce: its all_to_all posted, its all_gather not yet, where the blocking sync has run
//     both) while the next unit's backward (leaf, done) runs; the store is not complete until finish_sync();
//   * the result is independent of it: with integer-valued leaves every order gives the closed form
//     Σ_r Σ_mb f(r, mb, unit, i) exactly; with fractional leaves deterministic mode is bitwise the blocking
//     sync's (overlap 0), and the fast mode's within the bound of a re-associated sum;
//   * ZeRO-2 frees a unit's full-size buffers only once its sync has completed (ledger bytes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "comm/mpi_communicator.h"
#include "comm/trace_context.h"
#include "comm/traced_communicator.h"
#include "parallel/grad_store.h"

namespace sp::parallel {
namespace {

constexpr int64_t kMicroBatches = 3;
const int64_t kNumel[] = {37, 1000, 513};

// The leaf of rank r, micro-batch mb, unit u at element i: an integer (exact in any order) or a fraction.
float leaf_value(bool integer, int r, int64_t mb, int u, int64_t i) {
  const int64_t v = (r + 1) * 7 + mb * 13 + u * 5 + i % 11;
  return integer ? static_cast<float>(v) : 1.0f / static_cast<float>(v) + 1e-3f * static_cast<float>(i % 7);
}

struct Outcome {
  std::vector<std::vector<float>> owned;  // per unit: what owned_grads() holds after the step
  int64_t grad_bytes_after_first_sync = 0;
};

// One step on a fresh world communicator (collective: every rank calls run() alike).
Outcome run(const comm::Communicator& dp, config::Reduction mode, int zero, int overlap, bool integer) {
  std::vector<model::UnitLayout> layouts;
  for (int u = 0; u < 3; ++u)
    layouts.push_back({.id = u, .name = "u" + std::to_string(u), .tensors = {}, .numel = kNumel[u]});
  std::vector<const model::UnitLayout*> units;
  for (const model::UnitLayout& l : layouts) units.push_back(&l);
  MemoryLedger ledger;
  comm::TraceContext trace;
  comm::TracedCommunicator traced(comm::make_world_communicator(), trace, nullptr, nullptr);  // counts the posts
  GradientSync sync(traced, mode, ledger, 1000, std::max(1, overlap));
  GradStore store(units, kMicroBatches, zero, sync, ledger, trace, DType::kF32, mode, overlap);
  store.begin_step(0);
  Outcome out;
  const int r = dp.rank();
  for (int64_t mb = 0; mb < kMicroBatches; ++mb)
    for (int u = 2; u >= 0; --u) {  // the backward: last unit first
      BufView leaf = store.leaf(u);
      for (int64_t i = 0; i < kNumel[u]; ++i) leaf.f32()[i] += leaf_value(integer, r, mb, u, i);
      const int64_t posted = traced.ops_issued();
      store.done(u);
      if (mb + 1 < kMicroBatches || u != 2) continue;
      // Unit 2's total is final: its sync was posted (a no-op only at dp = 1) ...
      if (dp.size() > 1) {
        EXPECT_GT(traced.ops_issued(), posted) << "unit 2's sync was not posted at its done()";
        // Deterministic all-reduce: blocking runs its all_to_all and all_gather inside done(); overlapped, only
        // the all_to_all is posted there, the all_gather waits for the next unit's sync (or finish_sync).
        if (mode == config::Reduction::kDeterministic && zero == 0) {
          EXPECT_EQ(traced.ops_issued() - posted, overlap > 0 ? 1 : 2) << "ops posted by unit 2's done()";
        }
      }
      out.grad_bytes_after_first_sync = ledger.category(Category::kGrad).live;
      // ... and, with overlap, left in flight (not waited for) while units 1 and 0 run their backward.
      EXPECT_EQ(store.in_flight(), overlap > 0 && dp.size() > 1 ? 1 : 0);
    }
  if (overlap > 0 && dp.size() > 1) {
    EXPECT_GE(store.in_flight(), 1) << "every sync was waited for before the backward ended";
    EXPECT_FALSE(store.complete()) << "complete() before finish_sync with syncs in flight";
  }
  store.finish_sync();
  EXPECT_TRUE(store.complete());
  EXPECT_EQ(store.sync_spans().size(), 3u);
  for (const GradStore::SyncSpan& s : store.sync_spans()) EXPECT_GE(s.end_ns, s.start_ns);
  for (const ConstBufView& g : store.owned_grads()) out.owned.emplace_back(g.f32(), g.f32() + g.count);
  return out;
}

class GradOverlap : public ::testing::TestWithParam<config::Reduction> {};

TEST_P(GradOverlap, OverlappedSyncEqualsTheBlockingOne) {
  const auto dp = comm::make_world_communicator();
  const int n = dp->size(), r = dp->rank();
  const config::Reduction mode = GetParam();
  for (int zero = 0; zero <= 2; ++zero) {
    const Outcome blocking = run(*dp, mode, zero, 0, false);
    for (int overlap = 0; overlap <= 3; ++overlap) {
      SCOPED_TRACE(testing::Message() << "zero " << zero << " overlap " << overlap);
      // Closed form: integer leaves sum exactly in any order.
      const Outcome exact = run(*dp, mode, zero, overlap, true);
      for (int u = 0; u < 3; ++u) {
        const ShardRange mine = zero == 0 ? ShardRange{0, kNumel[u]} : shard_range_of(kNumel[u], n, r);
        ASSERT_EQ(std::ssize(exact.owned[static_cast<size_t>(u)]), mine.size());
        for (int64_t i = mine.begin; i < mine.end; ++i) {
          double want = 0;
          for (int q = 0; q < n; ++q)
            for (int64_t mb = 0; mb < kMicroBatches; ++mb) want += leaf_value(true, q, mb, u, i);
          ASSERT_EQ(exact.owned[static_cast<size_t>(u)][static_cast<size_t>(i - mine.begin)], static_cast<float>(want))
              << "unit " << u << " i " << i;
        }
      }
      // Fractional leaves: deterministic mode bitwise the blocking sync's; fast mode within n·k roundings.
      const Outcome frac = run(*dp, mode, zero, overlap, false);
      for (int u = 0; u < 3; ++u) {
        const std::vector<float>& got = frac.owned[static_cast<size_t>(u)];
        const std::vector<float>& want = blocking.owned[static_cast<size_t>(u)];
        ASSERT_EQ(got.size(), want.size());
        if (mode == config::Reduction::kDeterministic) {
          EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << "unit " << u;
        } else {
          // Both are sums of n·k positive terms; two orders differ by at most 2·(n·k)·ε·|sum|.
          const double bound = 2.0 * static_cast<double>(n * kMicroBatches) * 0x1p-24;
          for (size_t i = 0; i < got.size(); ++i)
            EXPECT_LE(std::fabs(got[i] - want[i]), bound * std::fabs(want[i])) << "unit " << u << " i " << i;
        }
      }
      // ZeRO-2 frees the full-size buffers when the sync completes: right after the first unit's done()
      // without overlap; with it, unit 2's buffers are still live while its sync is in flight.
      if (zero == 2 && n > 1) {
        const int64_t full = static_cast<int64_t>(sizeof(float)) * kNumel[2];
        const int64_t extra = exact.grad_bytes_after_first_sync - blocking.grad_bytes_after_first_sync;
        EXPECT_EQ(extra % full, 0);
        if (overlap > 0)
          EXPECT_GT(extra, 0);
        else
          EXPECT_EQ(extra, 0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reduction, GradOverlap,
                         ::testing::Values(config::Reduction::kDeterministic, config::Reduction::kFast),
                         [](const ::testing::TestParamInfo<config::Reduction>& info) {
                           return config::reduction_name(info.param);
                         });

}  // namespace
}  // namespace sp::parallel
