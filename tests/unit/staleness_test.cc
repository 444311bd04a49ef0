// Bounded staleness (SSP, docs/ps.md §SSP): the fixed schedule's arithmetic against its definition
// (every staleness 0..s reached, never beyond, versions non-decreasing, a refresh exactly where the
// version jumps), the histogram, the configuration rules of SSP and of its single-process replay (each
// error names the keys and the fix), the divergent-by-design class and which runs promise bitwise to
// each other, and the parameter-server faults' applicability (each refusal names why).
#include "comm/staleness.h"

#include <gtest/gtest.h>

#include <set>

#include "evidence/faults.h"
#include "plan/promise.h"
#include "plan/run_plan.h"
#include "unity_id.h"

namespace sp {
namespace {
namespace SP_TEST_ID {

using config::RunConfig;
using plan::RunPlan;

TEST(StalenessSchedule, EveryStalenessUpToTheBoundAndNeverBeyond) {
  for (int s = 0; s <= 4; ++s)
    for (int w = 0; w < 6; ++w) {
      std::set<int64_t> seen;
      int64_t previous = 0;
      for (int64_t t = 0; t < 40; ++t) {
        const int64_t v = comm::stale_version(t, w, s);
        ASSERT_GE(v, 0);
        ASSERT_LE(t - v, s) << "t " << t << " w " << w << " s " << s;
        ASSERT_GE(v, previous) << "versions must not go back";
        // The definition, written out: the last step t' ≤ t with (t' + w) mod (s + 1) = 0, or 0.
        int64_t want = 0;
        for (int64_t u = t; u >= 0; --u)
          if ((u + w) % (s + 1) == 0) {
            want = u;
            break;
          }
        ASSERT_EQ(v, want) << "t " << t << " w " << w << " s " << s;
        // A refresh after step t is exactly a jump to version t + 1 at step t + 1.
        EXPECT_EQ(comm::refreshes_after(t, w, s), comm::stale_version(t + 1, w, s) == t + 1);
        if (t >= s) seen.insert(t - v);
        previous = v;
      }
      EXPECT_EQ(seen.size(), static_cast<size_t>(s + 1)) << "w " << w << " s " << s;
    }
  // BSP: always the newest.
  for (int64_t t = 0; t < 10; ++t) EXPECT_EQ(comm::stale_version(t, 3, 0), t);
  // The worked example of docs/ps.md: s = 1, W = 2.
  std::vector<int64_t> w0, w1;
  for (int64_t t = 0; t < 5; ++t) {
    w0.push_back(comm::stale_version(t, 0, 1));
    w1.push_back(comm::stale_version(t, 1, 1));
  }
  EXPECT_EQ(w0, (std::vector<int64_t>{0, 0, 2, 2, 4}));
  EXPECT_EQ(w1, (std::vector<int64_t>{0, 1, 1, 3, 3}));
}

TEST(StalenessSchedule, HistogramCountsAppliedGradients) {
  comm::StalenessHistogram h;
  comm::add_staleness(h, 3, {3, 2, 2});
  comm::add_staleness(h, 4, {2});
  EXPECT_EQ(comm::staleness_json(h).dump(), R"({"0":1,"1":2,"2":1})");
}

RunConfig tiny() {
  nlohmann::json j = {
      {"model", {{"dim", 64}, {"n_layers", 2}, {"n_heads", 4}, {"n_kv_heads", 2}, {"ffn_dim", 96}, {"max_seq", 32}}},
      {"data", {{"vocab_size", 128}}},
      {"train", {{"global_batch", 8}, {"micro_batch_size", 2}, {"seq_len", 16}, {"steps", 6}}},
      {"evidence", {{"checkpoint_every", 0}}}};
  auto c = RunConfig::from_json(j);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *c;
}

RunConfig ssp(int workers, int servers, int staleness) {
  RunConfig c = tiny();
  c.parallel.architecture = config::Architecture::kParameterServer;
  c.parallel.dp = workers;
  c.parallel.servers = servers;
  c.parallel.staleness = staleness;
  return c;
}

RunConfig replay(int workers, int staleness) {
  RunConfig c = tiny();
  c.parallel.replay_workers = workers;
  c.parallel.staleness = staleness;
  return c;
}

std::string error_of(const RunConfig& c, int world) {
  auto p = RunPlan::make(c, world);
  EXPECT_FALSE(p.ok());
  if (p.ok()) return "";
  EXPECT_EQ(p.status().exit_code(), 2);
  return p.status().message();
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(StalenessPlan, ValidAndRefusedConfigurations) {
  EXPECT_TRUE(RunPlan::make(ssp(2, 1, 1), 3).ok());
  EXPECT_TRUE(RunPlan::make(ssp(4, 2, 5), 6).ok());  // s = steps − 1
  EXPECT_TRUE(RunPlan::make(replay(2, 1), 1).ok());
  EXPECT_TRUE(RunPlan::make(replay(4, 3), 1).ok());
  EXPECT_TRUE(has(error_of(ssp(2, 1, 6), 3), "parallel.staleness = 6 ≥ train.steps = 6"));
  EXPECT_TRUE(has(error_of(ssp(2, 1, 6), 3), "hint: parallel.staleness ≤ 5"));
  EXPECT_TRUE(has(error_of(ssp(1, 1, 1), 2), "with one worker (parallel.dp = 1)"));
  RunConfig free = ssp(2, 1, 1);
  free.parallel.staleness_schedule = config::StalenessSchedule::kFree;
  EXPECT_TRUE(has(error_of(free, 3), "the free-running bounded-staleness mode is not built"));
  RunConfig ckpt = ssp(2, 1, 1);
  ckpt.evidence.checkpoint_every = 2;
  EXPECT_TRUE(has(error_of(ckpt, 3), "with evidence.checkpoint_every = 2"));
  RunConfig no_ps = tiny();
  no_ps.parallel.staleness = 1;
  EXPECT_TRUE(has(error_of(no_ps, 1), "parallel.replay_workers=W"));  // the hint names the replay
  // The replay: one process, no other axis, a power-of-two split of the 4 micro-batches.
  RunConfig dp = replay(2, 1);
  dp.parallel.dp = 2;
  EXPECT_TRUE(has(error_of(dp, 2), "replays a parameter-server run in one process"));
  EXPECT_TRUE(has(error_of(replay(3, 1), 1), "the 4 micro-batches per step must split into a power-of-two number"));
  EXPECT_TRUE(has(error_of(replay(2, 6), 1), "parallel.staleness = 6 ≥ train.steps"));
}

TEST(StalenessClass, DivergentByDesignExceptAgainstTheSameSchedule) {
  using evidence::Equivalence;
  EXPECT_EQ(plan::promised_class(ssp(2, 1, 1)), Equivalence::kDivergentByDesign);
  EXPECT_EQ(plan::promised_class(replay(2, 1)), Equivalence::kDivergentByDesign);
  EXPECT_EQ(plan::promised_class(ssp(2, 1, 0)), Equivalence::kBitwise);  // BSP
  EXPECT_EQ(plan::promised_class(replay(2, 0)), Equivalence::kBitwise);  // the dp = 1 reference itself
  EXPECT_EQ(std::string(evidence::equivalence_name(Equivalence::kDivergentByDesign)), "divergent-by-design");
  // One schedule (W, s), whichever side runs it; another W or s is another schedule.
  EXPECT_EQ(plan::stale_schedule(ssp(2, 1, 1)), plan::stale_schedule(replay(2, 1)));
  EXPECT_EQ(plan::stale_schedule(ssp(2, 2, 1)), plan::stale_schedule(replay(2, 1)));  // servers do not matter
  EXPECT_NE(plan::stale_schedule(ssp(2, 1, 1)), plan::stale_schedule(replay(4, 1)));
  EXPECT_NE(plan::stale_schedule(ssp(2, 1, 1)), plan::stale_schedule(replay(2, 2)));
  EXPECT_FALSE(plan::stale_schedule(tiny()).has_value());
  // Weakest promise: std::max over promises never turns a divergent-by-design run into a pass.
  EXPECT_EQ(std::max(Equivalence::kWithinTolerance, Equivalence::kDivergentByDesign), Equivalence::kDivergentByDesign);
}

evidence::FaultTarget target(const RunConfig& c, int world) {
  auto p = RunPlan::make(c, world);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p->fault_target();
}

std::string refusal(const std::string& spec, const evidence::FaultTarget& t) {
  auto f = evidence::parse_fault(spec);
  EXPECT_TRUE(f.ok()) << spec;
  Status s = evidence::check_fault_applicable(*f, t);
  EXPECT_FALSE(s.ok()) << spec;
  return s.to_string();
}

TEST(PsFaults, ApplicabilityNamesTheRoleAndTheSchedule) {
  const evidence::FaultTarget bsp = target(ssp(2, 1, 0), 3), stale = target(ssp(2, 1, 1), 3);
  RunConfig dp2 = tiny();
  dp2.parallel.dp = 2;
  const evidence::FaultTarget allreduce = target(dp2, 2);
  for (const char* ok : {"ps-drop-push@2:2", "ps-apply-twice@2:2", "ps-stale-pull@2:1", "nan-injection@2:1",
                         "desync-extra-collective@2:2", "data-order@2:0"})
    EXPECT_TRUE(evidence::check_fault_applicable(*evidence::parse_fault(ok), bsp).ok()) << ok;
  EXPECT_TRUE(has(refusal("ps-drop-push@2:0", bsp), "rank 0 is a worker; the servers are ranks 2–2"));
  EXPECT_TRUE(has(refusal("ps-apply-twice@2:1", bsp), "rank 1 is a worker"));
  EXPECT_TRUE(has(refusal("ps-stale-pull@2:0", bsp), "worker 0 is the replicas' reference"));
  EXPECT_TRUE(has(refusal("ps-stale-pull@2:2", bsp), "rank 2 is not a worker"));
  EXPECT_TRUE(has(refusal("ps-stale-pull@5:1", bsp), "no step follows step 5"));
  EXPECT_TRUE(has(refusal("ps-drop-push@2:1", allreduce), "an all-reduce run (no parameter server)"));
  EXPECT_TRUE(has(refusal("nan-injection@2:2", bsp), "rank 2 is a parameter server: it runs no micro-batch"));
  EXPECT_TRUE(has(refusal("skip-grad-allreduce@2", bsp), "it breaks an all-reduce mechanism"));
  // Under SSP worker 1 takes the pull only after steps t with (t + 2) mod 2 = 0.
  EXPECT_TRUE(evidence::check_fault_applicable(*evidence::parse_fault("ps-stale-pull@2:1"), stale).ok());
  EXPECT_TRUE(has(refusal("ps-stale-pull@1:1", stale),
                  "keeps its cache after step 1 by schedule (it refreshes after "
                  "step 2)"));
  // The defaults prove uses when --fault names no rank.
  EXPECT_EQ(evidence::default_fault_rank(evidence::FaultKind::kPsDropPush, bsp), 2);
  EXPECT_EQ(evidence::default_fault_rank(evidence::FaultKind::kPsStalePull, bsp), 1);
  EXPECT_EQ(evidence::default_fault_name(2, 1, 1, 1), "ps-drop-push");
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp
