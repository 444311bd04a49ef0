// The learning-rate schedules against numbers computed independently from their published formulas:
// the default cosine (docs/config.md) and DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR as
// deepspeed/runtime/lr_schedules.py defines get_lr() at last_batch_iteration = i (docs/deepspeed.md).
// The expected values were computed with Python's math module from those formulas, not from this code.
#include "optim/lr_schedule.h"

#include <gtest/gtest.h>

#include "config/run_config.h"
#include "unity_id.h"

namespace sp::optim {
namespace {
namespace SP_TEST_ID {

TEST(LrSchedule, DefaultCosineIsUnchanged) {
  const LrSchedule s{.lr = 3e-3, .min_lr = 3e-4, .warmup_steps = 3, .total_steps = 30};
  const std::pair<int64_t, double> expected[] = {{0, 0.001},
                                                 {1, 0.002},
                                                 {2, 0.0030000000000000005},
                                                 {3, 0.003},
                                                 {10, 0.0025764262111227904},
                                                 {29, 0.00030912821704837687},
                                                 {30, 0.0003},
                                                 {40, 0.0003}};
  for (const auto& [step, lr] : expected) EXPECT_DOUBLE_EQ(s.at(step), lr) << "step " << step;
}

TEST(LrSchedule, WarmupLrLogAndLinear) {
  LrSchedule s{.kind = LrScheduleKind::kWarmupLr, .lr = 3e-3, .warmup_steps = 10, .warmup_min_lr = 1e-5};
  const std::pair<int64_t, double> log_values[] = {
      {0, 1e-05}, {1, 0.0009100796870353037}, {4, 0.002099920312964696}, {9, 0.003}, {10, 0.003}, {50, 0.003}};
  for (const auto& [i, lr] : log_values) EXPECT_DOUBLE_EQ(s.ds_lr(i), lr) << "iteration " << i;
  s.warmup_type = WarmupType::kLinear;
  const std::pair<int64_t, double> linear_values[] = {
      {0, 1e-05}, {1, 0.00030900000000000003}, {4, 0.001206}, {9, 0.0027010000000000003}, {10, 0.003}};
  for (const auto& [i, lr] : linear_values) EXPECT_DOUBLE_EQ(s.ds_lr(i), lr) << "iteration " << i;
}

TEST(LrSchedule, WarmupDecayLr) {
  LrSchedule s{.kind = LrScheduleKind::kWarmupDecayLr, .lr = 3e-3, .warmup_steps = 4, .total_steps = 20};
  const std::pair<int64_t, double> log_values[] = {
      {0, 0.0}, {2, 0.0023774437510817345}, {3, 0.003}, {4, 0.003}, {10, 0.001875}, {19, 0.0001875}, {20, 0.0},
      {25, 0.0}};
  for (const auto& [i, lr] : log_values) EXPECT_DOUBLE_EQ(s.ds_lr(i), lr) << "iteration " << i;
  s = {.kind = LrScheduleKind::kWarmupDecayLr,
       .lr = 1e-3,
       .warmup_steps = 5,
       .total_steps = 15,
       .warmup_type = WarmupType::kLinear,
       .warmup_min_lr = 1e-4};
  const std::pair<int64_t, double> linear_values[] = {
      {0, 0.0001}, {3, 0.00064}, {5, 0.001}, {7, 0.0008200000000000001}, {15, 0.0001}};
  for (const auto& [i, lr] : linear_values) EXPECT_DOUBLE_EQ(s.ds_lr(i), lr) << "iteration " << i;
}

TEST(LrSchedule, WarmupCosineLr) {
  LrSchedule s{.kind = LrScheduleKind::kWarmupCosineLr,
               .lr = 2e-3,
               .warmup_steps = 4,
               .total_steps = 24,
               .warmup_min_ratio = 0.1,
               .cos_min_ratio = 0.05};
  // Past total_num_steps DeepSpeed's cosine rises again (its formula has no clamp); so does this one.
  const std::pair<int64_t, double> log_values[] = {{0, 0.0002},
                                                   {1, 0.0011},
                                                   {3, 0.002},
                                                   {4, 0.001988303923565381},
                                                   {10, 0.0014812909747525696},
                                                   {23, 0.0001},
                                                   {24, 0.00011169607643461913}};
  for (const auto& [i, lr] : log_values) EXPECT_DOUBLE_EQ(s.ds_lr(i), lr) << "iteration " << i;
  s = {.kind = LrScheduleKind::kWarmupCosineLr,
       .lr = 1e-3,
       .warmup_steps = 8,
       .total_steps = 40,
       .warmup_type = WarmupType::kLinear};
  const std::pair<int64_t, double> linear_values[] = {{0, 0.0},
                                                      {4, 0.0005},
                                                      {7, 0.000875},
                                                      {8, 0.0009975926040997648},
                                                      {20, 0.0006451778243933685},
                                                      {39, 1.0000000000000001e-07}};
  for (const auto& [i, lr] : linear_values) EXPECT_DOUBLE_EQ(s.ds_lr(i), lr) << "iteration " << i;
}

// DeepSpeed uses warmup_num_steps as max(2, n): with n = 1 the log warmup still has ln(2) below it.
TEST(LrSchedule, WarmupStepsBelowTwoAreTwo) {
  const LrSchedule s{.kind = LrScheduleKind::kWarmupLr, .lr = 1.0, .warmup_steps = 1};
  EXPECT_DOUBLE_EQ(s.ds_lr(0), 0.0);
  EXPECT_DOUBLE_EQ(s.ds_lr(1), 1.0);
  EXPECT_DOUBLE_EQ(s.ds_lr(2), 1.0);
}

// The engine's step s uses what the scheduler holds after s calls to step(): the constructor's lr at
// step 0 (WarmupLR: warmup_min_lr; WarmupCosineLR: 0), then get_lr() at iteration s − 1.
TEST(LrSchedule, DeepSpeedStepping) {
  const LrSchedule w{.kind = LrScheduleKind::kWarmupLr, .lr = 3e-3, .warmup_steps = 10, .warmup_min_lr = 1e-5};
  EXPECT_DOUBLE_EQ(w.at(0), 1e-5);
  EXPECT_DOUBLE_EQ(w.at(1), 1e-5);
  EXPECT_DOUBLE_EQ(w.at(2), 0.0009100796870353037);
  EXPECT_DOUBLE_EQ(w.at(11), 0.003);
  const LrSchedule c{.kind = LrScheduleKind::kWarmupCosineLr,
                     .lr = 2e-3,
                     .warmup_steps = 4,
                     .total_steps = 24,
                     .warmup_min_ratio = 0.1,
                     .cos_min_ratio = 0.05};
  EXPECT_DOUBLE_EQ(c.at(0), 0.0);
  EXPECT_DOUBLE_EQ(c.at(1), 0.0002);
  EXPECT_DOUBLE_EQ(c.at(5), 0.001988303923565381);
}

TEST(LrSchedule, Names) {
  for (auto k : {LrScheduleKind::kCosine, LrScheduleKind::kWarmupLr, LrScheduleKind::kWarmupDecayLr,
                 LrScheduleKind::kWarmupCosineLr})
    EXPECT_EQ(*lr_schedule_from_name(lr_schedule_name(k)), k);
  auto bad = lr_schedule_from_name("OneCycle");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("OneCycle"), std::string::npos);
}

// train.lr_schedule through the configuration: the DeepSpeed keys reach the schedule, are absent from a
// cosine configuration's JSON (an fp32 contract is unchanged), and are refused with the cosine schedule.
TEST(LrSchedule, FromRunConfig) {
  nlohmann::json j = {{"model", {{"dim", 64}, {"n_layers", 2}, {"n_heads", 4}, {"ffn_dim", 128}, {"max_seq", 32}}},
                      {"train", {{"seq_len", 32}}}};
  auto plain = config::RunConfig::from_json(j);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_FALSE(plain->to_json()["train"].contains("lr_schedule"));
  j["train"]["lr_schedule"] = "warmup_decay_lr";
  j["train"]["warmup_min_lr"] = 1e-5;
  j["train"]["schedule_steps"] = 50;
  j["train"]["warmup_type"] = "linear";
  auto ds = config::RunConfig::from_json(j);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  const LrSchedule s = ds->train.schedule();
  EXPECT_EQ(s.kind, LrScheduleKind::kWarmupDecayLr);
  EXPECT_EQ(s.total_steps, 50);
  EXPECT_EQ(s.warmup_type, WarmupType::kLinear);
  EXPECT_DOUBLE_EQ(s.warmup_min_lr, 1e-5);
  auto again = config::RunConfig::from_json(ds->to_json());
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->to_json(), ds->to_json());
  j["train"]["lr_schedule"] = "cosine";
  auto refused = config::RunConfig::from_json(j);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("is a parameter of DeepSpeed's schedules"), std::string::npos)
      << refused.status().message();
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::optim
