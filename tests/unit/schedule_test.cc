// Pipeline schedules (plan/schedule.h) as data: published orders by closed form, completeness,
// dependency order, micro-batch order of backwards (needed for bitwise equivalence), and in-flight
// bounds (1F1B keeps at most p − r micro-batches; GPipe m).
#include "plan/schedule.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "unity_id.h"

namespace sp::parallel {
namespace {
namespace SP_TEST_ID {

TEST(Schedule, OneFOneBPublishedOrder) {
  // p = 2, m = 4 (Narayanan et al. 2021, Fig. 4 pattern): rank 0 warms up with one forward.
  EXPECT_EQ(plan::schedule_string(plan::schedule_actions(config::Schedule::k1F1B, 0, 2, 1, 4)),
            "F0.0 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2 B0.3");
  EXPECT_EQ(plan::schedule_string(plan::schedule_actions(config::Schedule::k1F1B, 1, 2, 1, 4)),
            "F0.0 B0.0 F0.1 B0.1 F0.2 B0.2 F0.3 B0.3");
  EXPECT_EQ(plan::schedule_string(plan::schedule_actions(config::Schedule::kGpipe, 0, 2, 1, 2)), "F0.0 F0.1 B0.0 B0.1");
}

TEST(Schedule, InterleavedWarmupMatchesMegatron) {
  // p = 2, v = 2, m = 4, rank 0: warm-up (p − r − 1)·2 + (v − 1)·p = 4 forwards, cycling chunks in groups of p.
  const auto a = plan::schedule_actions(config::Schedule::kInterleaved, 0, 2, 2, 4);
  EXPECT_EQ(plan::schedule_string(std::vector<plan::PipeAction>(a.begin(), a.begin() + 5)), "F0.0 F0.1 F1.0 F1.1 F0.2");
  EXPECT_EQ(a[5], (plan::PipeAction{false, 1, 0}));  // first backward: last chunk, micro-batch 0
}

struct Case {
  config::Schedule s;
  int p, v;
  int64_t m;
};

TEST(Schedule, EveryScheduleIsCompleteOrderedAndBounded) {
  const std::vector<Case> cases = {
      {config::Schedule::kGpipe, 1, 1, 1},       {config::Schedule::kGpipe, 4, 1, 6},
      {config::Schedule::k1F1B, 1, 1, 3},        {config::Schedule::k1F1B, 4, 1, 2},
      {config::Schedule::k1F1B, 4, 1, 8},        {config::Schedule::kInterleaved, 2, 2, 4},
      {config::Schedule::kInterleaved, 4, 2, 8}, {config::Schedule::kInterleaved, 2, 3, 2}};
  for (const Case& c : cases) {
    for (int r = 0; r < c.p; ++r) {
      const auto acts = plan::schedule_actions(c.s, r, c.p, c.v, c.m);
      std::set<std::pair<int, int64_t>> fwd, bwd;
      std::map<int, int64_t> next_bwd;
      for (const plan::PipeAction& a : acts) {
        const auto key = std::make_pair(a.virtual_stage, a.micro_batch);
        if (a.forward) {
          EXPECT_TRUE(fwd.insert(key).second) << "duplicate forward";
        } else {
          EXPECT_TRUE(fwd.count(key)) << "backward before forward";
          EXPECT_TRUE(bwd.insert(key).second) << "duplicate backward";
          EXPECT_EQ(a.micro_batch, next_bwd[a.virtual_stage]++) << "backwards out of micro-batch order";
        }
      }
      EXPECT_EQ(static_cast<int64_t>(fwd.size()), c.m * c.v);
      EXPECT_EQ(static_cast<int64_t>(bwd.size()), c.m * c.v);
      const auto peak = plan::peak_in_flight(acts, c.v);
      if (c.s == config::Schedule::kGpipe) {
        EXPECT_EQ(peak[0], c.m);
      }
      if (c.s == config::Schedule::k1F1B) {
        EXPECT_EQ(peak[0], std::min<int64_t>(c.p - r, c.m));
      }
    }
  }
}

TEST(Schedule, ZbH1DefersRWeightPassesOnRankR) {
  // p = 2, m = 4: rank 0 (lag 0) would run each W right after its B, which with nothing sent upstream between
  // them is the full backward: 1F1B's list; rank 1 (lag 1) one micro-batch later, its last W after the
  // cool-down (Qi et al. 2023, Fig. 3 pattern).
  EXPECT_EQ(plan::schedule_string(plan::schedule_actions(config::Schedule::kZbH1, 0, 2, 1, 4)),
            "F0.0 F0.1 B0.0 F0.2 B0.1 F0.3 B0.2 B0.3");
  EXPECT_EQ(plan::schedule_string(plan::schedule_actions(config::Schedule::kZbH1, 1, 2, 1, 4)),
            "F0.0 B0.0 F0.1 B0.1 W0.0 F0.2 B0.2 W0.1 F0.3 B0.3 W0.2 W0.3");
}

TEST(Schedule, ZbH1IsOneFOneBWithEachBackwardSplit) {
  // Rank 0: 1F1B's list, no split (its W would directly follow its B). Ranks ≥ 1: forwards and B passes in
  // 1F1B's order; every micro-batch's W after its B, W in micro-batch order (the gradient leaves' order, as
  // 1F1B's backwards); at most min(p, m) micro-batches between F and W.
  for (const auto& [p, m] : std::vector<std::pair<int, int64_t>>{{2, 4}, {4, 4}, {4, 8}, {3, 2}, {4, 1}}) {
    for (int r = 0; r < p; ++r) {
      const auto zb = plan::schedule_actions(config::Schedule::kZbH1, r, p, 1, m);
      EXPECT_EQ(plan::splits_backward(zb), r > 0) << "p " << p << " r " << r;
      EXPECT_FALSE(plan::splits_backward(plan::schedule_actions(config::Schedule::k1F1B, r, p, 1, m)));
      if (r == 0) {
        EXPECT_EQ(zb, plan::schedule_actions(config::Schedule::k1F1B, r, p, 1, m)) << "p " << p;
        continue;
      }
      std::vector<plan::PipeAction> fb;
      std::set<int64_t> b_done;
      int64_t next_w = 0;
      for (plan::PipeAction a : zb) {
        if (a.weight()) {
          EXPECT_TRUE(b_done.count(a.micro_batch)) << "W before its B";
          EXPECT_EQ(a.micro_batch, next_w++) << "W passes out of micro-batch order";
          continue;
        }
        if (!a.forward) {
          EXPECT_EQ(a.pass, plan::BackwardPass::kInput);
          b_done.insert(a.micro_batch);
          a.pass = plan::BackwardPass::kFull;
        }
        fb.push_back(a);
      }
      EXPECT_EQ(next_w, m);
      EXPECT_EQ(fb, plan::schedule_actions(config::Schedule::k1F1B, r, p, 1, m)) << "p " << p << " r " << r;
      EXPECT_EQ(plan::peak_in_flight(zb, 1)[0], std::min<int64_t>(p, m)) << "p " << p << " r " << r;
      // The last rank runs every F(k) and B(k) back to back: its one set of head activations (llama_stage.h,
      // HeadActivations) holds micro-batch k from F(k) until B(k) has formed the head's gradients.
      for (size_t j = 0; r == p - 1 && j < zb.size(); ++j)
        if (zb[j].forward) {
          ASSERT_LT(j + 1, zb.size());
          EXPECT_EQ(zb[j + 1], (plan::PipeAction{false, 0, zb[j].micro_batch, plan::BackwardPass::kInput}))
              << "p " << p << " m " << m << ": F" << zb[j].micro_batch << " not followed by its B";
        }
    }
  }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::parallel
