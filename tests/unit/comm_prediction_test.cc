// comm_predicted.json format 2 (evidence/comm_prediction.h, plan/traffic_model.h): the traffic per
// step class. Checked against independent statements of the same facts: the trainer's schedule rule
// written out literally here, plan::predict_step_traffic per step (what format 1 expanded step by step), a
// document size that does not grow with train.steps, strict parsing, and the trace comparison on
// synthetic traces (as predicted; one op missing; a damaged step number 2^39 that must not make the
// check walk every step).
#include "evidence/comm_prediction.h"

#include <gtest/gtest.h>

#include <chrono>

#include "evidence/trace_prediction.h"
#include "plan/run_plan.h"
#include "plan/traffic_model.h"
#include "unity_id.h"

namespace sp::parallel {
namespace {
namespace SP_TEST_ID {

config::RunConfig hybrid(int64_t steps, int64_t checksum_every, int64_t eval_every) {
  nlohmann::json j = {
      {"model", {{"dim", 64}, {"n_layers", 4}, {"n_heads", 4}, {"n_kv_heads", 2}, {"ffn_dim", 96}, {"max_seq", 32}}},
      {"data", {{"vocab_size", 128}}},
      {"train",
       {{"global_batch", 8},
        {"micro_batch_size", 2},
        {"seq_len", 16},
        {"steps", steps},
        {"eval_every", eval_every},
        {"eval_batches", 2}}},
      {"evidence", {{"checksum_every", checksum_every}}},
      {"parallel", {{"dp", 2}, {"pp", 2}, {"zero", 1}}}};
  auto c = config::RunConfig::from_json(j);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *c;
}

struct PlanAndGrid {
  plan::RunPlan plan;
  comm::ProcessGrid grid;
};
PlanAndGrid setup(const config::RunConfig& c) {
  auto plan = plan::RunPlan::make(c, 4);
  EXPECT_TRUE(plan.ok()) << plan.status().to_string();
  auto grid = comm::ProcessGrid::create(2, 1, 2, c.parallel.axis_order, 4);
  EXPECT_TRUE(grid.ok());
  return {*plan, *grid};
}

evidence::ClassTraffic cells_of(const plan::StepTraffic& t, bool eval_only) {
  evidence::ClassTraffic out;
  for (const auto& [k, v] : t)
    if (!eval_only || k.second == "eval") out[k] = {v.ops, v.bytes};
  return out;
}

TEST(CommPrediction, EveryStepIsItsClassAsTheTrainerSchedulesIt) {
  for (int64_t steps : {1, 2, 5, 7})
    for (int64_t ce : {0, 1, 2, 3})
      for (int64_t ee : {0, 1, 2, 3}) {
        const PlanAndGrid s = setup(hybrid(steps, ce, ee));
        auto p = evidence::parse_comm_prediction(plan::predict_run_traffic(s.plan, s.grid), "test");
        ASSERT_TRUE(p.ok()) << p.status().to_string();
        for (int64_t step = -1; step < steps; ++step) {
          // The trainer's rule (trainer.cc before format 2), written out independently.
          const bool checks = ce > 0 && step % ce == 0;
          const bool eval = (ee > 0 && (step + 1) % ee == 0) || step + 1 == steps;
          for (int r = 0; r < 4; ++r) {
            const evidence::ClassTraffic want =
                step < 0 ? cells_of(plan::predict_step_traffic(s.plan, s.grid, r, false, true), true)
                         : cells_of(plan::predict_step_traffic(s.plan, s.grid, r, checks, eval), false);
            ASSERT_NE(p->step(r, step), nullptr);
            EXPECT_EQ(*p->step(r, step), want) << "steps " << steps << " checksum_every " << ce << " eval_every " << ee
                                               << " step " << step << " rank " << r;
          }
        }
        EXPECT_TRUE(p->step(0, steps)->empty());
        EXPECT_TRUE(p->step(0, -2)->empty());
        EXPECT_EQ(p->step(4, 0), nullptr);
      }
}

TEST(CommPrediction, SizeDoesNotGrowWithSteps) {
  const auto t0 = std::chrono::steady_clock::now();
  const PlanAndGrid a = setup(hybrid(10, 1, 3)), b = setup(hybrid(int64_t{1} << 40, 1, 3));
  nlohmann::json da = plan::predict_run_traffic(a.plan, a.grid), db = plan::predict_run_traffic(b.plan, b.grid);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_EQ(da["ranks"], db["ranks"]);
  EXPECT_EQ(db["schedule"]["steps"], int64_t{1} << 40);
  EXPECT_LE(db.dump().size(), da.dump().size() + 16);
}

TEST(CommPrediction, MalformedDocumentsAreRefusedNamingTheKey) {
  const PlanAndGrid s = setup(hybrid(4, 1, 2));
  const nlohmann::json good = plan::predict_run_traffic(s.plan, s.grid);
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& expect) {
    nlohmann::json d = good;
    edit(d);
    auto p = evidence::parse_comm_prediction(d, "comm_predicted.json");
    ASSERT_FALSE(p.ok()) << expect;
    EXPECT_NE(p.status().message().find(expect), std::string::npos) << p.status().message();
  };
  refused([](auto& d) { d["format_version"] = 1; }, "format_version 1");
  refused([](auto& d) { d["ranks"][0]["classes"].erase("step+eval"); }, "no class \"step+eval\"");
  refused([](auto& d) { d["ranks"][1]["classes"]["step"]["world"]["evidence"]["ops"] = -1; }, "ops = -1");
  refused([](auto& d) { d["schedule"]["steps"] = 0; }, "schedule.steps = 0");
  refused([](auto& d) { d["ranks"][0]["steps"] = nlohmann::json::object(); }, "unknown key");
  refused([](auto& d) { d["ranks"][1]["rank"] = 0; }, "appears twice");
}

// Rank `rank`'s records for steps [first, last] exactly as predicted (one record per op; a cell's
// bytes on its first record).
std::vector<comm::TraceRecord> as_predicted(const evidence::CommPrediction& p, int rank, int64_t first, int64_t last) {
  std::vector<comm::TraceRecord> out;
  for (int64_t step = first; step <= last; ++step)
    for (const auto& [key, cell] : *p.step(rank, step))
      for (int64_t i = 0; i < cell.ops; ++i) {
        comm::TraceRecord r;
        r.group = key.first;
        r.phase = *comm::phase_from_name(key.second);
        r.step = step;
        r.bytes = i == 0 ? cell.bytes : 0;
        out.push_back(r);
      }
  return out;
}

TEST(CommPrediction, TraceComparison) {
  const PlanAndGrid s = setup(hybrid(6, 2, 3));
  const nlohmann::json doc = plan::predict_run_traffic(s.plan, s.grid);
  auto p = evidence::parse_comm_prediction(doc, "test");
  ASSERT_TRUE(p.ok());
  std::vector<evidence::RankTrace> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back({.world_rank = r, .records = as_predicted(*p, r, -1, 5)});
  {
    evidence::TraceReport report;
    evidence::compare_with_prediction(ranks, doc, report);
    EXPECT_TRUE(report.matches_prediction()) << report.prediction_mismatches.front().message;
    EXPECT_GT(report.prediction_cells, 0);
  }
  {  // one op of rank 2 in step 3 missing: named by rank, step, group and phase
    auto damaged = ranks;
    auto& recs = damaged[2].records;
    const auto it = std::find_if(recs.begin(), recs.end(), [](const comm::TraceRecord& r) { return r.step == 3; });
    const comm::TraceRecord gone = *it;
    recs.erase(it);
    evidence::TraceReport report;
    evidence::compare_with_prediction(damaged, doc, report);
    ASSERT_FALSE(report.prediction_mismatches.empty());
    const auto& m = report.prediction_mismatches.front();
    EXPECT_EQ(m.step, 3);
    EXPECT_EQ(m.ranks, std::vector<int>{2});
    EXPECT_EQ(m.group, gone.group);
  }
  {  // a damaged step number far beyond the run: reported, quickly, without walking every step
    auto damaged = ranks;
    comm::TraceRecord far = damaged[1].records.back();
    far.step = int64_t{1} << 39;
    damaged[1].records.push_back(far);
    const auto t0 = std::chrono::steady_clock::now();
    evidence::TraceReport report;
    evidence::compare_with_prediction(damaged, doc, report);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
    EXPECT_FALSE(report.matches_prediction());
  }
  {  // a run that stopped after step 2: the rest is not compared, and the warning says so
    std::vector<evidence::RankTrace> stopped;
    for (int r = 0; r < 4; ++r) stopped.push_back({.world_rank = r, .records = as_predicted(*p, r, -1, 2)});
    evidence::TraceReport report;
    evidence::compare_with_prediction(stopped, doc, report);
    EXPECT_TRUE(report.matches_prediction());
    ASSERT_FALSE(report.warnings.empty());
    EXPECT_NE(report.warnings.front().find("3 steps after it"), std::string::npos) << report.warnings.front();
  }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::parallel
