// Bubble measurement (evidence/bubble.h) on synthetic timelines with closed-form answers: an ideal
// GPipe timeline of p stages, m micro-batches, forward cost f and backward cost b per micro-batch
// has span (m+p−1)(f+b) and bubble (p−1)/(m+p−1) on every stage, exactly the theory; an unbalanced
// one matches the stage-cost model; dp groups are spanned separately. Also the file readers.

#include "evidence/bubble.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "core/file_io.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::evidence {
namespace {
namespace SP_TEST_ID {

namespace fs = std::filesystem;

// Ideal GPipe: stage i runs forward j at [(i+j)·f, +f), then after all forwards ((m+p−1)·f) the
// backward of micro-batch j (last stage first) at T_f + ((p−1−i)+j)·b. Between its compute the
// stage waits in `recv` (from the end of its previous interval), so comm = span − compute − tail.
std::vector<TimelineInterval> gpipe_stage(int64_t step, int stage, int p, int m, int64_t f, int64_t b) {
  std::vector<TimelineInterval> out;
  int64_t cursor = 0;
  const auto add = [&](const char* kind, int64_t mb, int64_t t0, int64_t t1) {
    if (t0 > cursor) out.push_back({step, "recv", 0, mb, cursor, t0});
    out.push_back({step, kind, 0, mb, t0, t1});
    cursor = t1;
  };
  for (int j = 0; j < m; ++j) add("forward", j, (stage + j) * f, (stage + j + 1) * f);
  const int64_t tf = static_cast<int64_t>(m + p - 1) * f;
  for (int j = 0; j < m; ++j) add("backward", j, tf + (p - 1 - stage + j) * b, tf + (p - stage + j) * b);
  return out;
}

PipelineShape shape(int pp, int m, const std::string& schedule = "gpipe", int dp = 1, int v = 1) {
  PipelineShape s;
  s.dp = dp;
  s.pp = pp;
  s.schedule = schedule;
  s.virtual_stages = v;
  s.micro_batches = m;
  return s;
}

TEST(BubbleTheory, ClosedForms) {
  EXPECT_DOUBLE_EQ(bubble_theory(shape(1, 4)), 0.0);
  EXPECT_DOUBLE_EQ(bubble_theory(shape(2, 4)), 1.0 / 5.0);
  EXPECT_DOUBLE_EQ(bubble_theory(shape(4, 8, "1f1b")), 3.0 / 11.0);
  EXPECT_DOUBLE_EQ(bubble_theory(shape(2, 4, "interleaved", 1, 2)), 1.0 / 9.0);
  EXPECT_DOUBLE_EQ(bubble_theory(shape(4, 8, "interleaved", 1, 2)), 3.0 / 19.0);
}

TEST(Bubble, IdealGpipeEqualsTheoryOnEveryStage) {
  for (const auto& [p, m] : std::vector<std::pair<int, int>>{{2, 4}, {4, 4}, {4, 8}, {3, 1}}) {
    std::vector<std::vector<TimelineInterval>> tl(static_cast<size_t>(p));
    std::vector<PipelinePlace> places;
    for (int i = 0; i < p; ++i) {
      places.push_back({0, i});
      for (int64_t step = 0; step < 3; ++step) {
        // Step 0 is warm-up with a different (slower) cost: it must not be used.
        auto iv = gpipe_stage(step, i, p, m, step == 0 ? 1000 : 100, step == 0 ? 3000 : 200);
        tl[static_cast<size_t>(i)].insert(tl[static_cast<size_t>(i)].end(), iv.begin(), iv.end());
      }
    }
    const BubbleReport r = bubble_of_timelines(tl, places, shape(p, m));
    const double theory = static_cast<double>(p - 1) / (m + p - 1);
    SCOPED_TRACE(fmt::format("p {} m {}", p, m));
    EXPECT_DOUBLE_EQ(r.theory, theory);
    ASSERT_EQ(r.steps_used, (std::vector<int64_t>{1, 2}));
    ASSERT_EQ(r.stages.size(), static_cast<size_t>(p));
    for (const StageBubble& s : r.stages) {
      EXPECT_NEAR(s.bubble, theory, 1e-12) << "stage " << s.stage;
      EXPECT_NEAR(s.model_bubble, theory, 1e-12) << "stage " << s.stage;
      EXPECT_DOUBLE_EQ(s.span_ms, (m + p - 1) * 300 / 1000.0);
      EXPECT_DOUBLE_EQ(s.compute_ms, m * 300 / 1000.0);
      // Waiting fills every gap up to the stage's last backward; the tail after it is idle, not recv.
      const double tail_us = static_cast<double>(s.stage) * 200;
      EXPECT_DOUBLE_EQ(s.comm_ms, ((m + p - 1) * 300 - m * 300 - tail_us) / 1000.0);
    }
    EXPECT_NEAR(r.measured, theory, 1e-12);
    EXPECT_NEAR(r.compute_fraction, 1 - theory, 1e-12);
    EXPECT_EQ(r.rank_steps.size(), static_cast<size_t>(2 * p));
  }
}

TEST(Bubble, UnbalancedStagesMatchTheStageCostModel) {
  // p = 2, m = 2; stage 0 costs c0 = 100 per micro-batch (f 40, b 60), stage 1 costs c1 = 300
  // (f 100, b 200). Hand schedule (GPipe): s0 F0 [0,40) F1 [40,80); s1 F0 [40,140) F1 [140,240)
  // B0 [240,440) B1 [440,640); s0 B0 [440,500) B1 [640,700). Span 700.
  std::vector<std::vector<TimelineInterval>> tl = {{{1, "forward", 0, 0, 0, 40},
                                                    {1, "forward", 0, 1, 40, 80},
                                                    {1, "recv", 0, 0, 80, 440},
                                                    {1, "backward", 0, 0, 440, 500},
                                                    {1, "recv", 0, 1, 500, 640},
                                                    {1, "backward", 0, 1, 640, 700}},
                                                   {{1, "recv", 0, 0, 0, 40},
                                                    {1, "forward", 0, 0, 40, 140},
                                                    {1, "forward", 0, 1, 140, 240},
                                                    {1, "backward", 0, 0, 240, 440},
                                                    {1, "backward", 0, 1, 440, 640},
                                                    {1, "send", 0, 1, 640, 645}}};
  const BubbleReport r = bubble_of_timelines(tl, {{0, 0}, {0, 1}}, shape(2, 2));
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_DOUBLE_EQ(r.stages[0].span_ms, 0.7);
  EXPECT_NEAR(r.stages[0].bubble, 1 - 200.0 / 700.0, 1e-12);
  EXPECT_NEAR(r.stages[1].bubble, 1 - 600.0 / 700.0, 1e-12);
  // Model: span = (100 + 300) + (2 − 1)·300 = 700; bubble_i = 1 − 2·c_i / 700.
  EXPECT_NEAR(r.stages[0].model_bubble, 1 - 200.0 / 700.0, 1e-12);
  EXPECT_NEAR(r.stages[1].model_bubble, 1 - 600.0 / 700.0, 1e-12);
  EXPECT_DOUBLE_EQ(r.stages[0].comm_ms, 0.5);
  EXPECT_DOUBLE_EQ(r.stages[1].comm_ms, 0.045);
  EXPECT_NEAR(r.measured, 1 - 400.0 / 700.0, 1e-12);
  EXPECT_DOUBLE_EQ(r.measured_min, r.stages[1].bubble);
  EXPECT_DOUBLE_EQ(r.measured_max, r.stages[0].bubble);
  EXPECT_EQ(r.steps_used, (std::vector<int64_t>{1}));  // no step 0 in the file: step 1 is used
}

TEST(Bubble, DpGroupsAreSpannedSeparatelyAndStagesAveraged) {
  // dp 2 × pp 2; group 0 = ranks {0, 1}, group 1 = ranks {2, 3}. Group 0 ends at 1000, group 1 at
  // 2000. Stage 0: rank 0 computes 500 (bubble 0.5), rank 2 computes 1000 (0.5). Stage 1: rank 1
  // computes 800 (0.2), rank 3 computes 1000 (0.5) → stage 1 mean 0.35.
  std::vector<std::vector<TimelineInterval>> tl = {{{1, "forward", 0, 0, 0, 500}},
                                                   {{1, "forward", 0, 0, 0, 800}, {1, "send", 0, 0, 800, 1000}},
                                                   {{1, "backward", 0, 0, 0, 1000}},
                                                   {{1, "backward", 0, 0, 1000, 2000}}};
  const BubbleReport r = bubble_of_timelines(tl, {{0, 0}, {0, 1}, {1, 0}, {1, 1}}, shape(2, 2, "1f1b", 2));
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.stages[0].ranks, 2);
  EXPECT_NEAR(r.stages[0].bubble, 0.5, 1e-12);
  EXPECT_NEAR(r.stages[1].bubble, 0.35, 1e-12);
  EXPECT_DOUBLE_EQ(r.stages[0].span_ms, 1.5);
  EXPECT_DOUBLE_EQ(r.stages[1].comm_ms, 0.1);
  EXPECT_NEAR(r.measured, 0.425, 1e-12);
}

TEST(Bubble, SingleStepRunUsesStepZeroAndWarns) {
  std::vector<std::vector<TimelineInterval>> tl = {{{0, "forward", 0, 0, 0, 10}, {0, "backward", 0, 0, 10, 30}}};
  const BubbleReport r = bubble_of_timelines(tl, {{0, 0}}, shape(1, 1));
  EXPECT_EQ(r.steps_used, (std::vector<int64_t>{0}));
  EXPECT_FALSE(r.warnings.empty());
  EXPECT_DOUBLE_EQ(r.measured, 0.0);
  EXPECT_DOUBLE_EQ(r.theory, 0.0);
}

TEST(BubbleFiles, ParseTimelineNamesTheLineAndField) {
  auto ok = parse_timeline(
      "{\"step\":1,\"kind\":\"forward\",\"virtual_stage\":0,\"micro_batch\":2,\"t0_us\":5,\"t1_us\":9}\n\n", "t.jsonl");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  ASSERT_EQ(ok->size(), 1u);
  EXPECT_EQ((*ok)[0].micro_batch, 2);
  EXPECT_EQ((*ok)[0].t1_us, 9);
  auto bad = parse_timeline(
      "{\"step\":1,\"kind\":\"forward\",\"virtual_stage\":0,\"micro_batch\":2,\"t0_us\":5,\"t1_us\":9}\n"
      "{\"step\":1,\"kind\":\"forward\",\"virtual_stage\":0,\"micro_batch\":2,\"t0_us\":5}\n",
      "t.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("t.jsonl:2"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("t1_us"), std::string::npos);
  auto backwards = parse_timeline(
      "{\"step\":1,\"kind\":\"recv\",\"virtual_stage\":0,\"micro_batch\":0,\"t0_us\":9,\"t1_us\":5}", "u.jsonl");
  ASSERT_FALSE(backwards.ok());
  EXPECT_NE(backwards.status().message().find("u.jsonl:1"), std::string::npos);
  EXPECT_FALSE(parse_timeline("not json\n", "v.jsonl").ok());
}

// A split line (docs/formats/timeline.md): returned apart from the intervals; its kinds must all be there,
// non-negative, and sum to step_us.
TEST(BubbleFiles, ParseTimelineSplitLines) {
  const std::string iv =
      "{\"step\":1,\"kind\":\"forward\",\"virtual_stage\":0,\"micro_batch\":0,\"t0_us\":0,\"t1_us\":9}\n";
  auto split = [](int gemm, int other, int step_us) {
    return fmt::format(
        "{{\"step\":1,\"step_us\":{},\"split_us\":{{\"gemm\":{},\"attention\":1,\"memory_bound\":1,\"comm\":1,"
        "\"wait\":0,\"optimizer\":1,\"evidence\":1,\"other\":{}}}}}\n",
        step_us, gemm, other);
  };
  std::vector<StepTimeSplit> splits;
  auto ok = parse_timeline(iv + split(5, 2, 12), "t.jsonl", &splits);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->size(), 1u);  // the split is not an interval
  ASSERT_EQ(splits.size(), 1u);
  EXPECT_EQ(splits[0].step_us, 12);
  EXPECT_EQ(splits[0].us[0], 5);                                      // gemm first (kTimeKindNames order)
  EXPECT_EQ(splits[0].us[kTimeKinds], 2);                             // other last
  EXPECT_TRUE(parse_timeline(iv + split(5, 2, 12), "t.jsonl").ok());  // splits not wanted: checked, skipped
  for (const std::string& bad : {split(5, 2, 13), split(-1, 8, 12)}) {
    auto r = parse_timeline(iv + bad, "t.jsonl");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("t.jsonl:2"), std::string::npos) << r.status().message();
  }
  auto missing = parse_timeline("{\"step\":1,\"step_us\":1,\"split_us\":{\"gemm\":1}}\n", "t.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("split_us"), std::string::npos) << missing.status().message();
}

TEST(BubbleFiles, ShapeAndPlacesFromContractAndTopology) {
  const nlohmann::json contract = {
      {"config",
       {{"parallel", {{"dp", 2}, {"tp", 1}, {"pp", 4}, {"virtual_stages", 2}, {"schedule", "interleaved"}}},
        {"train", {{"global_batch", 32}, {"micro_batch_size", 2}}}}}};
  auto s = pipeline_shape_of(contract);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->micro_batches, 8);  // 32 / 2 / dp 2
  EXPECT_DOUBLE_EQ(bubble_theory(*s), 3.0 / 19.0);
  nlohmann::json broken = contract;
  broken["config"]["train"].erase("global_batch");
  auto e = pipeline_shape_of(broken);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("config.train.global_batch"), std::string::npos) << e.status().message();

  const nlohmann::json topo = {{"world_size", 4}, {"groups", {{"pp", {{0, 2}, {1, 3}}}}}};
  auto p = pipeline_places_of(topo);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ((*p)[2].group, 0);
  EXPECT_EQ((*p)[2].stage, 1);
  EXPECT_EQ((*p)[3].group, 1);
  nlohmann::json missing = topo;
  missing["groups"]["pp"] = {{0, 2}, {1}};
  EXPECT_FALSE(pipeline_places_of(missing).ok());  // rank 3 in no group
}

TEST(BubbleFiles, RunDirectoryRoundTrip) {
  const sp::test::TempDir tmp;
  const fs::path dir = tmp.path();
  ASSERT_TRUE(make_directories((dir / "timeline").string()).ok());
  const nlohmann::json contract = {
      {"config",
       {{"parallel", {{"dp", 1}, {"tp", 1}, {"pp", 2}, {"virtual_stages", 1}, {"schedule", "gpipe"}}},
        {"train", {{"global_batch", 8}, {"micro_batch_size", 2}}}}}};
  const nlohmann::json topo = {{"world_size", 2}, {"groups", {{"pp", {{0, 1}}}}}};
  ASSERT_TRUE(write_file((dir / "contract.json").string(), contract.dump()).ok());
  ASSERT_TRUE(write_file((dir / "topology.json").string(), topo.dump()).ok());
  for (int r = 0; r < 2; ++r) {
    std::string text;
    for (int64_t step = 0; step < 3; ++step)
      for (const TimelineInterval& iv : gpipe_stage(step, r, 2, 4, 50, 100))
        text += nlohmann::json{{"step", iv.step},    {"kind", iv.kind},
                               {"virtual_stage", 0}, {"micro_batch", iv.micro_batch},
                               {"t0_us", iv.t0_us},  {"t1_us", iv.t1_us}}
                    .dump() +
                "\n";
    ASSERT_TRUE(write_file((dir / fmt::format("timeline/rank-{:05d}.jsonl", r)).string(), text).ok());
  }
  auto rep = bubble_of_run(dir.string());
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_NEAR(rep->measured, 1.0 / 5.0, 1e-12);
  EXPECT_NE(rep->to_markdown().find("0.200"), std::string::npos);
  EXPECT_EQ(rep->to_json()["stages"].size(), 2u);
  fs::remove(dir / "timeline/rank-00001.jsonl");
  auto missing = bubble_of_run(dir.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("rank-00001.jsonl"), std::string::npos);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::evidence
