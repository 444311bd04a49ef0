// The planner's evaluation (planner/evaluate.h) and pipeline simulation (planner/pipeline_sim.h): the simulated
// bubble equals the closed form where the closed form is exact; a tensor-parallel group placed across nodes
// costs more than the same group inside a node; the search's rules are the engine's (plan::RunPlan::violations);
// memory without per-tensor names has the same totals. Exactness against real runs: tests/plan/plan_exact.py.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "evidence/bubble.h"
#include "planner/evaluate.h"
#include "planner/pipeline_sim.h"
#include "unity_id.h"

namespace sp::planner {
namespace {
namespace SP_TEST_ID {

ClusterSpec dgx_a100(int nodes) {
  const std::string dir = std::getenv("SP_SOURCE_DIR")
                              ? std::string(std::getenv("SP_SOURCE_DIR"))
                              : std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
  auto c = load_cluster(dir + "/configs/clusters", "dgx-a100");
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *with_nodes(*c, nodes);
}

PipelineTimes equal_times(config::Schedule s, int pp, int v, int64_t m) {
  PipelineTimes t{.schedule = s,
                  .pp = pp,
                  .virtual_stages = v,
                  .micro_batches = m,
                  .forward_s = {},
                  .backward_s = {},
                  .weight_s = {}};
  t.forward_s.assign(static_cast<size_t>(pp * v), 1.0 / v);
  t.backward_s.assign(static_cast<size_t>(pp * v), 2.0 / v);
  return t;
}

TEST(PipelineSim, EqualDurationsGiveTheClosedFormBubble) {
  for (config::Schedule s : {config::Schedule::kGpipe, config::Schedule::k1F1B})
    for (int pp : {1, 2, 4})
      for (int64_t m : {1, 4, 8}) {
        const PipelineSimulation r = simulate_pipeline(equal_times(s, pp, 1, m));
        const double closed = (pp - 1.0) / (static_cast<double>(m) + pp - 1.0);
        EXPECT_NEAR(r.bubble_fraction, closed, 1e-12) << config::schedule_name(s) << " pp " << pp << " m " << m;
        EXPECT_NEAR(r.makespan_s, 3.0 * (static_cast<double>(m) + pp - 1), 1e-9);
      }
  // Interleaved: (p−1)/(v·m + p−1) with chunks of 1/v the work.
  const PipelineSimulation r = simulate_pipeline(equal_times(config::Schedule::kInterleaved, 2, 2, 4));
  EXPECT_NEAR(r.bubble_fraction, 1.0 / (2 * 4 + 1), 1e-12);
}

TEST(PipelineSim, ZbH1WithEqualPassesGivesItsClosedForm) {
  // F = B = W = 1 (backward 2, half of it W): (p − 1)/(3m + p − 1), one third of 1F1B's idle time, over the
  // schedule the engine runs (plan/schedule.h); the measured bubble's theory is the same formula. It holds for
  // m ≥ p (the paper's setting): with fewer micro-batches the last W passes outlast the drain (m = 1, p = 4: 9
  // units, not 6).
  for (int pp : {2, 3, 4})
    for (int64_t m : {int64_t{pp}, int64_t{4}, int64_t{8}}) {
      const PipelineSimulation zb = simulate_pipeline(equal_times(config::Schedule::kZbH1, pp, 1, m));
      const double closed = (pp - 1.0) / (3.0 * static_cast<double>(m) + pp - 1.0);
      EXPECT_NEAR(zb.bubble_fraction, closed, 1e-12) << "pp " << pp << " m " << m;
      EXPECT_NEAR(zb.makespan_s, 3.0 * static_cast<double>(m) + pp - 1, 1e-9);
      EXPECT_NEAR(closed, evidence::bubble_theory({.pp = pp, .schedule = "zb-h1", .micro_batches = m}), 1e-15);
      const double one_f_one_b = simulate_pipeline(equal_times(config::Schedule::k1F1B, pp, 1, m)).makespan_s;
      EXPECT_NEAR(one_f_one_b - 3.0 * static_cast<double>(m), 3 * (zb.makespan_s - 3.0 * static_cast<double>(m)), 1e-9);
    }
}

TEST(PipelineSim, TransfersLengthenTheStep) {
  PipelineTimes t = equal_times(config::Schedule::k1F1B, 4, 1, 8);
  const double base = simulate_pipeline(t).makespan_s;
  t.transfer_s = 0.25;
  // The first forward and the last backward each cross the 3 boundaries once: at least 6 transfers.
  EXPECT_GE(simulate_pipeline(t).makespan_s, base + 6 * 0.25 - 1e-9);
}

PlanQuery llama7b(int nodes, int dp, int tp, const std::string& order) {
  PlanQuery q{.cluster = dgx_a100(nodes), .config = {}, .dtype = "bf16", .efficiency = 0.5};
  auto shape = named_shape("llama-7b");
  EXPECT_TRUE(shape.ok());
  q.config.model = shape->llama_config();
  q.config.train.global_batch = 64;
  q.config.train.micro_batch_size = 1;
  q.config.train.seq_len = 2048;
  q.config.train.eval_batches = 0;
  q.config.parallel.dp = dp;
  q.config.parallel.tp = tp;
  q.config.parallel.reduction = config::Reduction::kFast;
  q.config.parallel.axis_order = order;
  return q;
}

TEST(PlanEvaluate, TensorParallelAcrossNodesCostsMoreThanInsideANode) {
  auto inside = evaluate_plan(llama7b(2, 2, 8, "tp-dp-pp"));
  auto across = evaluate_plan(llama7b(2, 2, 8, "dp-tp-pp"));
  ASSERT_TRUE(inside.ok()) << inside.status().to_string();
  ASSERT_TRUE(across.ok()) << across.status().to_string();
  EXPECT_EQ(inside->links[0].second.link, "intra-node nvswitch");
  EXPECT_EQ(across->links[0].second.link, "inter-node infiniband");
  EXPECT_GT(across->pass_comm_seconds, 2 * inside->pass_comm_seconds);
  EXPECT_GT(across->step_seconds, inside->step_seconds);
  // The topology check flags the across-nodes placement only, naming the fix.
  EXPECT_TRUE(inside->placement_warnings.empty());
  ASSERT_EQ(across->placement_warnings.size(), 1u);
  EXPECT_NE(across->placement_warnings[0].find("tp groups of 8 ranks cross nodes"), std::string::npos);
  EXPECT_NE(across->placement_warnings[0].find("tp-dp-pp"), std::string::npos);
  // Memory and bytes do not depend on the placement; only their prices do.
  EXPECT_EQ(inside->peak_bytes, across->peak_bytes);
  EXPECT_EQ(inside->ranks[0].traffic.size(), across->ranks[0].traffic.size());
  EXPECT_LE(inside->mfu, 0.5);  // never above the stated GEMM efficiency
}

TEST(PlanEvaluate, MemoryWithoutNamesHasTheSameTotals) {
  PlanQuery q = llama7b(2, 2, 8, "tp-dp-pp");
  auto named = evaluate_plan(q);
  q.named_memory = false;
  auto bare = evaluate_plan(q);
  ASSERT_TRUE(named.ok() && bare.ok());
  ASSERT_EQ(named->ranks.size(), bare->ranks.size());
  for (size_t i = 0; i < named->ranks.size(); ++i) {
    EXPECT_EQ(named->ranks[i].memory.total.peak, bare->ranks[i].memory.total.peak);
    for (size_t k = 0; k < kCategoryCount; ++k)
      EXPECT_EQ(named->ranks[i].memory.by_category[k].peak, bare->ranks[i].memory.by_category[k].peak);
    EXPECT_FALSE(named->ranks[i].memory.entries.empty());
    EXPECT_TRUE(bare->ranks[i].memory.entries.empty());
  }
}

// A published 16-bit run priced as it ran (PlanQuery::stream_dtype, plan published): the residual stream, the tp
// sums and the pipeline messages at 2 bytes a value, through the same ledger and traffic models; nothing else
// moves. dp 1 × tp 8 × pp 2 of llama-7b on 2 nodes (full recompute: the residual stream is what is saved).
TEST(PlanEvaluate, A16BitStreamHalvesTheStreamsBytesAndNothingElse) {
  PlanQuery q = llama7b(2, 1, 8, "tp-dp-pp");
  q.config.parallel.pp = 2;
  q.config.train.recompute = model::Recompute::kFull;
  q.config.model.tie_embeddings = false;
  auto fp32 = evaluate_plan(q);
  q.stream_dtype = DType::kF16;
  auto fp16 = evaluate_plan(q);
  ASSERT_TRUE(fp32.ok() && fp16.ok()) << fp32.status().to_string() << fp16.status().to_string();
  EXPECT_EQ(fp32->plan.stream_bytes, 4);
  EXPECT_EQ(fp16->plan.stream_bytes, 2);
  ASSERT_EQ(fp32->ranks.size(), fp16->ranks.size());
  for (size_t i = 0; i < fp32->ranks.size(); ++i) {
    const auto& a = fp32->ranks[i].traffic;
    const auto& b = fp16->ranks[i].traffic;
    ASSERT_EQ(a.size(), b.size());
    for (const auto& [key, t] : a) {
      const auto& [group, phase, op] = key;
      const plan::Traffic& h = b.at(key);
      EXPECT_EQ(h.ops, t.ops) << group << " " << phase << " " << op;
      // tp sums of N·C values and the pipeline's (N, C) messages halve; the loss's sums of N values (fp32, on
      // the last stage, in the same forward all_reduce entry: 3 · 4N bytes per micro-batch, under 0.1 % here),
      // the optimizer's and the evidence's collectives do not.
      if (phase == "forward" || phase == "backward") {
        EXPECT_GE(h.bytes, t.bytes / 2) << group << " " << phase << " " << op;
        EXPECT_LE(h.bytes - t.bytes / 2, t.bytes / 1000) << group << " " << phase << " " << op;
      } else {
        EXPECT_EQ(h.bytes, t.bytes) << group << " " << phase << " " << op;
      }
    }
    // Memory: only the activation and comm categories shrink (the saved residual stream, the tp staging).
    const auto& ma = fp32->ranks[i].memory.by_category;
    const auto& mb = fp16->ranks[i].memory.by_category;
    for (size_t k = 0; k < kCategoryCount; ++k) {
      const auto c = static_cast<Category>(k);
      if (c == Category::kActivation)
        EXPECT_LT(mb[k].peak, ma[k].peak);
      else
        EXPECT_EQ(mb[k].peak, ma[k].peak) << category_name(c);
    }
  }
  EXPECT_LT(fp16->pass_comm_seconds, fp32->pass_comm_seconds);
  EXPECT_NEAR(fp16->pipeline_times.transfer_s - q.cluster.inter->latency_s,
              (fp32->pipeline_times.transfer_s - q.cluster.inter->latency_s) / 2, 1e-12);
  EXPECT_EQ(fp16->compute_seconds, fp32->compute_seconds);
}

TEST(PlanEvaluate, RefusalsAreTheEngines) {
  const StrategyEvaluators ev = engine_evaluators(llama7b(2, 2, 8, "tp-dp-pp"));  // fast reductions, as the base's
  // Every recompute mode is the engine's own: selective is run, not refused.
  EXPECT_TRUE(
      ev.rules(plan::Strategy{
                   .dp = 2, .tp = 8, .recompute = model::Recompute::kSelective, .reduction = config::Reduction::kFast})
          .empty());
  const auto tied = ev.rules(plan::Strategy{.dp = 8, .tp = 1, .pp = 2, .reduction = config::Reduction::kFast});
  EXPECT_TRUE(tied.empty());  // llama-7b is untied
  const auto odd = ev.rules(
      plan::Strategy{.dp = 16, .tp = 1, .pp = 1, .reduction = config::Reduction::kFast, .micro_batch_size = 3});
  ASSERT_FALSE(odd.empty());
  EXPECT_EQ(odd[0].kind, ExclusionKind::kDoesNotDivide) << odd[0].rule;
  // The kind is the rule's own (plan::RuleViolation), not read from its wording.
  const auto zero2 =
      ev.rules(plan::Strategy{.dp = 8, .tp = 1, .pp = 2, .zero = 2, .reduction = config::Reduction::kFast});
  ASSERT_EQ(zero2.size(), 1u);
  EXPECT_EQ(zero2[0].kind, ExclusionKind::kRefused) << zero2[0].rule;
  const auto layers = ev.rules(plan::Strategy{.dp = 1,
                                              .tp = 1,
                                              .pp = 16,
                                              .schedule = config::Schedule::kInterleaved,
                                              .virtual_stages = 4,
                                              .reduction = config::Reduction::kFast});
  ASSERT_FALSE(layers.empty());
  for (const auto& x : layers) EXPECT_EQ(x.kind, ExclusionKind::kDoesNotDivide) << x.rule;
  auto bad = evaluate_plan([&] {
    PlanQuery b = llama7b(2, 2, 8, "tp-dp-pp");
    b.dtype = "int4";
    return b;
  }());
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("int4"), std::string::npos) << bad.status().message();
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::planner
