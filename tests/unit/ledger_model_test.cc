// The ledger model's closed form over steps (plan/ledger_model.h): plan::predict_ledger, which replays
// only the first steps and adds the rest's allocation counts in closed form, equals its naive twin
// plan::predict_ledger_step_by_step (every step replayed) byte for byte and count for count, over
// strategies whose allocation state settles differently (ZeRO-2/3 free and re-allocate gradient
// buffers every step, pipelines grow activation pools, recompute, evaluation periods); and it takes
// the same time for 2^40 steps as for 10.
#include "plan/ledger_model.h"

#include <gtest/gtest.h>

#include <chrono>

#include "parallel/memory_fit.h"
#include "plan/run_plan.h"
#include "unity_id.h"

namespace sp::parallel {
namespace {
namespace SP_TEST_ID {

config::RunConfig config(int dp, int pp, int zero, int64_t steps, int64_t eval_every, const char* schedule,
                         bool recompute) {
  nlohmann::json j = {
      {"model", {{"dim", 32}, {"n_layers", 4}, {"n_heads", 4}, {"n_kv_heads", 2}, {"ffn_dim", 64}, {"max_seq", 16}}},
      {"data", {{"vocab_size", 64}}},
      {"train",
       {{"global_batch", 8},
        {"micro_batch_size", 1},
        {"seq_len", 8},
        {"steps", steps},
        {"eval_every", eval_every},
        {"eval_batches", 4},
        {"recompute", recompute ? "full" : "none"}}},
      {"parallel", {{"dp", dp}, {"pp", pp}, {"zero", zero}, {"schedule", schedule}}}};
  auto c = config::RunConfig::from_json(j);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *c;
}

void expect_same(const plan::LedgerPrediction& a, const plan::LedgerPrediction& b, const std::string& what) {
  EXPECT_EQ(a.total.live, b.total.live) << what;
  EXPECT_EQ(a.total.peak, b.total.peak) << what;
  for (size_t c = 0; c < a.by_category.size(); ++c) {
    EXPECT_EQ(a.by_category[c].live, b.by_category[c].live) << what;
    EXPECT_EQ(a.by_category[c].peak, b.by_category[c].peak) << what;
  }
  ASSERT_EQ(a.entries.size(), b.entries.size()) << what;
  for (const auto& [name, e] : a.entries) {
    const auto& f = b.entries.at(name);
    EXPECT_TRUE(e.live == f.live && e.peak == f.peak && e.allocations == f.allocations && e.category == f.category)
        << what << ": " << name << " allocations " << e.allocations << " vs " << f.allocations;
  }
}

TEST(LedgerModel, ClosedFormEqualsStepByStep) {
  struct Case {
    int dp, pp, zero;
    const char* schedule;
    bool recompute;
  };
  const Case cases[] = {{1, 1, 0, "1f1b", false}, {2, 1, 2, "1f1b", false},  {2, 1, 3, "1f1b", true},
                        {2, 2, 1, "1f1b", false}, {1, 2, 0, "gpipe", false}, {2, 1, 1, "1f1b", true}};
  int compared = 0;
  for (const Case& k : cases)
    for (int64_t steps : {1, 2, 3, 7, 12})
      for (int64_t eval_every : {0, 1, 3, 5}) {
        const config::RunConfig c = config(k.dp, k.pp, k.zero, steps, eval_every, k.schedule, k.recompute);
        auto plan = plan::RunPlan::make(c, k.dp * k.pp);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        for (int dp = 0; dp < k.dp; ++dp)
          for (int pp = 0; pp < k.pp; ++pp) {
            const plan::LedgerModelInput in = plan::ledger_model_input(*plan, {dp, 0, pp}, c.train.eval_batches);
            expect_same(plan::predict_ledger(in), plan::predict_ledger_step_by_step(in),
                        fmt::format("dp {} pp {} zero {} {} recompute {} steps {} eval_every {} rank dp{}.pp{}", k.dp,
                                    k.pp, k.zero, k.schedule, k.recompute, steps, eval_every, dp, pp));
            ++compared;
          }
      }
  EXPECT_EQ(compared, (1 + 2 + 2 + 4 + 2 + 2) * 5 * 4);  // every rank of every case
}

// Sequence parallelism (docs/memory.md §"Sequence parallelism"): against the same tp2 run without it, the
// residual stream, mid, the norm outputs and their rstd hold N/2 rows, every other activation is unchanged,
// and the workspace gains the gathered norm output and a tp staging of 2·N·C floats; the closed form still
// equals the step-by-step replay.
TEST(LedgerModel, SequenceParallelShardsTheResidualStream) {
  auto predict = [](bool sp, bool step_by_step) {
    config::RunConfig c = config(1, 2, 0, 3, 2, "1f1b", false);
    c.parallel.tp = 2;
    c.parallel.sequence_parallel = sp;
    auto plan = plan::RunPlan::make(c, 4);
    EXPECT_TRUE(plan.ok()) << plan.status().to_string();
    const plan::LedgerModelInput in = plan::ledger_model_input(*plan, {0, 0, 1}, c.train.eval_batches);
    return step_by_step ? plan::predict_ledger_step_by_step(in) : plan::predict_ledger(in);
  };
  const plan::LedgerPrediction tp = predict(false, false), sp = predict(true, false);
  expect_same(sp, predict(true, true), "sequence parallel, closed form vs step by step");
  const int64_t N = 8, C = 32;  // B·T, dim of config()
  auto bytes = [](const plan::LedgerPrediction& p, const std::string& name) {
    const auto it = p.entries.find(name);
    return it == p.entries.end() ? int64_t{-1} : it->second.peak;
  };
  for (const char* t : {".xn1", ".mid", ".xn2", ".rstd1", ".rstd2"})
    EXPECT_EQ(bytes(sp, std::string("act.s0.layers.2") + t) * 2, bytes(tp, std::string("act.s0.layers.2") + t)) << t;
  for (const char* t : {".qkv", ".probs", ".attn", ".gu", ".h"})
    EXPECT_EQ(bytes(sp, std::string("act.s0.layers.2") + t), bytes(tp, std::string("act.s0.layers.2") + t)) << t;
  for (const char* t : {"act.s0.res0", "act.s0.xf", "act.s0.rstdf", "scratch.dres"})
    EXPECT_EQ(bytes(sp, t) * 2, bytes(tp, t)) << t;
  EXPECT_EQ(bytes(sp, "act.s0.res0"), N / 2 * C * 4);
  EXPECT_EQ(bytes(tp, "scratch.xn_full"), -1);
  EXPECT_EQ(bytes(sp, "scratch.xn_full"), N * C * 4);
  EXPECT_EQ(bytes(sp, "comm.tp_staging"), 2 * N * C * 4);
  EXPECT_EQ(bytes(tp, "comm.tp_staging"), N * C * 4);
}

// Mixed precision with 16-bit gradients: the transient fp32 leaves (docs/memory.md §"What phase 2 changes")
// must repeat from step to step like everything else; the evidence reads the 16-bit gradients in place.
TEST(LedgerModel, ClosedFormEqualsStepByStepMixedPrecision) {
  struct Case {
    int dp, pp, zero;
    bool recompute;
  };
  const Case cases[] = {{1, 1, 0, false}, {2, 1, 2, false}, {2, 1, 3, true}, {2, 2, 1, false}};
  for (const Case& k : cases)
    for (int64_t steps : {1, 3, 7})
      for (DType grad : {DType::kF32, DType::kBF16}) {
        config::RunConfig c = config(k.dp, k.pp, k.zero, steps, 3, "1f1b", k.recompute);
        c.train.precision = {DType::kBF16, grad};
        auto plan = plan::RunPlan::make(c, k.dp * k.pp);
        ASSERT_TRUE(plan.ok()) << plan.status().to_string();
        const plan::LedgerModelInput in = plan::ledger_model_input(*plan, {0, 0, 0}, c.train.eval_batches);
        EXPECT_EQ(in.param_bytes, 2);
        const plan::LedgerPrediction p = plan::predict_ledger(in);
        expect_same(
            p, plan::predict_ledger_step_by_step(in),
            fmt::format("bf16 grad {} dp {} pp {} zero {} steps {}", dtype_name(grad), k.dp, k.pp, k.zero, steps));
        EXPECT_EQ(p.entries.count("optim.master." + model::unit_name(c.model, model::embed_unit())), 1u);
        EXPECT_EQ(p.entries.count("grad.widened"), 0u);
        EXPECT_EQ(p.entries.count("grad." + model::unit_name(c.model, model::embed_unit()) + ".leaf"),
                  grad == DType::kF32 ? 0u : 1u);
      }
}

TEST(LedgerModel, IndependentOfTheStepCount) {
  const config::RunConfig small = config(2, 1, 2, 10, 3, "1f1b", false),
                          huge = config(2, 1, 2, int64_t{1} << 40, 3, "1f1b", false);
  auto ps = plan::RunPlan::make(small, 2), ph = plan::RunPlan::make(huge, 2);
  ASSERT_TRUE(ps.ok() && ph.ok());
  const auto t0 = std::chrono::steady_clock::now();
  const plan::LedgerPrediction a = plan::predict_ledger(plan::ledger_model_input(*ps, {0, 0, 0}, 4));
  const plan::LedgerPrediction b = plan::predict_ledger(plan::ledger_model_input(*ph, {0, 0, 0}, 4));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_EQ(a.total.peak, b.total.peak);
  // ZeRO-2 allocates its gradient buffers again every step: the count scales with the steps.
  EXPECT_EQ(b.entries.at("grad.layers.0.b0").allocations, int64_t{1} << 40);
  EXPECT_EQ(a.entries.at("grad.layers.0.b0").allocations, 10);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::parallel
