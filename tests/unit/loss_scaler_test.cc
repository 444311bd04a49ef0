// optim/loss_scaler.h against DeepSpeed's DynamicLossScaler.update_scale, traced by hand step by step from
// its source (deepspeed/runtime/fp16/loss_scaler.py, scale_factor 2) for four scenarios: hysteresis that
// is not refilled by clean steps, consecutive hysteresis, growth every `window` clean steps, and the
// minimum scale (error, or clamped when raising is off). Plus config validation and the checkpoint state.
#include "optim/loss_scaler.h"

#include <gtest/gtest.h>

#include <vector>

#include "unity_id.h"

namespace sp::optim {
namespace {
namespace SP_TEST_ID {

struct Step {
  bool overflow;
  double scale_after;  // cur_scale after update_scale
  int hysteresis_after;
};

void replay(LossScaler& s, const std::vector<Step>& steps, const char* scenario) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const double before = s.scale();
    auto skipped = s.update(steps[i].overflow);
    ASSERT_TRUE(skipped.ok()) << scenario << " step " << i << ": " << skipped.status().to_string();
    EXPECT_EQ(*skipped, steps[i].overflow) << scenario << " step " << i;
    EXPECT_EQ(s.scale(), steps[i].scale_after) << scenario << " step " << i << " (scale before " << before << ")";
    EXPECT_EQ(s.state().hysteresis, steps[i].hysteresis_after) << scenario << " step " << i;
    EXPECT_EQ(s.state().iter, static_cast<int64_t>(i + 1));
  }
}

TEST(LossScaler, HysteresisIsRefilledOnlyByGrowth) {
  // initial_scale_power 16, window 3, hysteresis 2, min 1.
  LossScaler s({.initial_scale_power = 16, .window = 3, .hysteresis = 2, .min_scale = 1.0});
  EXPECT_EQ(s.scale(), 65536.0);
  replay(s,
         {
             {true, 65536, 1},   // iter 0: overflow, hysteresis 2 → 1, scale kept; last_overflow = 0
             {true, 32768, 1},   // iter 1: hysteresis is 1 → halve; last_overflow = 1
             {false, 32768, 1},  // iter 2: (2 − 1) % 3 ≠ 0
             {false, 32768, 1},  // iter 3: (3 − 1) % 3 ≠ 0
             {false, 65536, 2},  // iter 4: (4 − 1) % 3 = 0 → double, hysteresis refilled
             {true, 65536, 1},   // iter 5: overflow eats the hysteresis; last_overflow = 5
             {false, 65536, 1},  // iter 6: clean, but not a window boundary: hysteresis stays 1
             {true, 32768, 1},   // iter 7: halve
             {true, 16384, 1},   // iter 8: halve again (nothing refilled the hysteresis)
             {false, 16384, 1},  // iter 9
             {false, 16384, 1},  // iter 10
             {false, 32768, 2},  // iter 11: (11 − 8) % 3 = 0 → double
         },
         "refill-on-growth");
  EXPECT_EQ(s.state().last_overflow_iter, 8);
}

TEST(LossScaler, ConsecutiveHysteresisAbsorbsIsolatedOverflows) {
  LossScaler s({.initial_scale_power = 10, .window = 4, .hysteresis = 2, .consecutive_hysteresis = true});
  replay(s,
         {
             {true, 1024, 1},   // iter 0: hysteresis 2 → 1
             {false, 1024, 2},  // iter 1: refilled at once; (1 − 0) % 4 ≠ 0
             {true, 1024, 1},   // iter 2
             {false, 1024, 2},  // iter 3
             {true, 1024, 1},   // iter 4
             {true, 512, 1},    // iter 5: two in a row halve
             {false, 512, 2},   // iter 6
             {false, 512, 2},   // iter 7
             {false, 512, 2},   // iter 8
             {false, 1024, 2},  // iter 9: (9 − 5) % 4 = 0 → double
         },
         "consecutive");
}

TEST(LossScaler, GrowsEveryWindowFromTheStart) {
  // last_overflow_iter starts at −1, so the first doubling comes after `window` clean steps.
  LossScaler s({.initial_scale_power = 0, .window = 2, .hysteresis = 1});
  replay(s, {{false, 1, 1}, {false, 2, 1}, {false, 2, 1}, {false, 4, 1}, {true, 2, 1}, {false, 2, 1}, {false, 4, 1}},
         "growth");
}

TEST(LossScaler, MinimumScale) {
  LossScaler s({.initial_scale_power = 1, .window = 100, .hysteresis = 1, .min_scale = 1.0});
  ASSERT_TRUE(s.update(true).ok());
  EXPECT_EQ(s.scale(), 1.0);
  const LossScalerState before = s.state();
  auto r = s.update(true);  // DeepSpeed raises "Current loss scale already at minimum"
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("minimum"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(s.state(), before) << "a refused update changes nothing";
  // With raising off the scale stays clamped at the minimum: max(1/2, 1) = 1.
  LossScaler t(
      {.initial_scale_power = 1, .window = 100, .hysteresis = 1, .min_scale = 1.0, .raise_at_min_scale = false});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(t.update(true).ok());
  EXPECT_EQ(t.scale(), 1.0);
  // A min_loss_scale that is not a power of two is reached exactly: max(2^-3 / 2, 0.1) = 0.1.
  LossScaler u({.initial_scale_power = 0, .window = 100, .hysteresis = 1, .min_scale = 0.1});
  for (double want : {0.5, 0.25, 0.125, 0.1}) {
    ASSERT_TRUE(u.update(true).ok());
    EXPECT_EQ(u.scale(), want);
  }
}

TEST(LossScaler, ConfigValidation) {
  EXPECT_TRUE(LossScalerConfig{}.validate("train").ok());
  LossScalerConfig bad{.initial_scale_power = 70, .window = 0, .hysteresis = 0, .min_scale = -1.0};
  const Status st = bad.validate("train");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.exit_code(), 2);
  for (const char* key :
       {"train.initial_scale_power", "train.loss_scale_window", "train.hysteresis", "train.min_loss_scale"})
    EXPECT_NE(st.message().find(key), std::string::npos) << key << " not named in: " << st.to_string();
  const LossScalerConfig above{.initial_scale_power = 2, .min_scale = 8.0};  // min above the initial 2^2
  EXPECT_FALSE(above.validate("train").ok());
}

TEST(LossScaler, StateRoundTripsAndResumesIdentically) {
  const LossScalerConfig c{.initial_scale_power = 12, .window = 3, .hysteresis = 2};
  LossScaler a(c);
  const std::vector<bool> pattern = {true, false, true, true, false, false, false, true, false, false};
  for (size_t i = 0; i < 4; ++i) ASSERT_TRUE(a.update(pattern[i]).ok());
  const nlohmann::json saved = nlohmann::json::parse(a.state_json().dump());  // through text, as in a checkpoint
  auto restored = LossScaler::state_from_json(saved, c);
  ASSERT_TRUE(restored.ok()) << restored.status().to_string();
  LossScaler b(c);
  b.restore(*restored);
  EXPECT_EQ(b.state(), a.state());
  for (size_t i = 4; i < pattern.size(); ++i) {
    ASSERT_TRUE(a.update(pattern[i]).ok());
    ASSERT_TRUE(b.update(pattern[i]).ok());
    EXPECT_EQ(b.state(), a.state()) << "after step " << i;
  }
  // Damaged states are refused, naming the key.
  nlohmann::json j = saved;
  j.erase("hysteresis");
  EXPECT_NE(LossScaler::state_from_json(j, c).status().message().find("hysteresis"), std::string::npos);
  j = saved;
  j["scale"] = "big";
  EXPECT_NE(LossScaler::state_from_json(j, c).status().message().find("scale"), std::string::npos);
  j = saved;
  j["hysteresis"] = 5;
  EXPECT_FALSE(LossScaler::state_from_json(j, c).ok());
  j = saved;
  j["extra"] = 1;
  EXPECT_NE(LossScaler::state_from_json(j, c).status().message().find("extra"), std::string::npos);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::optim
