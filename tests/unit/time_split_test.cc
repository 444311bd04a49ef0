// The step's split by kind (core/time_split.h) on scopes with known durations: a scope counts its own time
// minus its nested scopes' (so the kinds never overlap and sum to the outer scope's wall time), an owning
// scope inside an owning scope counts nothing (its time stays the outer one's), a TimeScope inside an owner
// still counts its own. Durations are spun on the same steady clock, so every bound below is exact.

#include "core/time_split.h"

#include <gtest/gtest.h>

#include "unity_id.h"

namespace sp {
namespace {
namespace SP_TEST_ID {

constexpr int64_t kMs = 1000000;

void spin(int64_t ns) {
  const int64_t end = now_ns() + ns;
  while (now_ns() < end) {
  }
}

TEST(TimeSplit, NestedScopesCountTheirSelfTimeOnce) {
  const TimeSplit before = thread_time_split();
  const int64_t t0 = now_ns();
  {
    const TimeScope outer(TimeKind::kOptimizer);
    spin(kMs);
    {
      const TimeScope inner(TimeKind::kComm);
      spin(kMs);
    }
    spin(kMs);
  }
  const int64_t wall = now_ns() - t0;
  const TimeSplit d = thread_time_split() - before;
  EXPECT_GE(d[TimeKind::kComm], kMs);
  EXPECT_GE(d[TimeKind::kOptimizer], 2 * kMs);
  EXPECT_LE(d[TimeKind::kOptimizer], wall - kMs);  // the comm millisecond is not the optimizer's too
  EXPECT_LE(d.sum(), wall);
  EXPECT_EQ(d.sum(), d[TimeKind::kComm] + d[TimeKind::kOptimizer]);
}

TEST(TimeSplit, AnOwnerInsideAnOwnerLeavesItsTimeToTheOuterOne) {
  const TimeSplit before = thread_time_split();
  {
    const OwnerTimeScope attention(TimeKind::kAttention);
    spin(kMs);
    {
      const OwnerTimeScope gemm(TimeKind::kGemm);  // attention's own product: attention's time
      spin(kMs);
    }
  }
  const int64_t t0 = now_ns();
  {
    const OwnerTimeScope gemm(TimeKind::kGemm);  // alone again: counts
    spin(kMs);
  }
  const int64_t alone = now_ns() - t0;
  const TimeSplit d = thread_time_split() - before;
  EXPECT_GE(d[TimeKind::kAttention], 2 * kMs);
  EXPECT_GE(d[TimeKind::kGemm], kMs);
  EXPECT_LE(d[TimeKind::kGemm], alone);  // the nested millisecond would exceed it
}

TEST(TimeSplit, CommunicationInsideAPhaseIsCommunication) {
  const TimeSplit before = thread_time_split();
  const int64_t t0 = now_ns();
  {
    const OwnerTimeScope optimizer(TimeKind::kOptimizer);
    {
      const TimeScope comm(TimeKind::kComm);
      spin(kMs);
      const TimeScope digest(TimeKind::kEvidence);  // a trace digest inside the collective
      spin(kMs);
    }
    const OwnerTimeScope cast(TimeKind::kMemoryBound);  // the optimizer's own cast
    spin(kMs);
  }
  const int64_t wall = now_ns() - t0;
  const TimeSplit d = thread_time_split() - before;
  EXPECT_GE(d[TimeKind::kComm], kMs);
  EXPECT_GE(d[TimeKind::kEvidence], kMs);
  EXPECT_LE(d.sum(), wall);
  EXPECT_GE(d[TimeKind::kOptimizer], kMs);
  EXPECT_EQ(d[TimeKind::kMemoryBound], 0);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp
