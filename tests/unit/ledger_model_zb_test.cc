// ZB-H1's memory requirement on the ledger model (plan/ledger_model.h), which equals the measured ledger on
// every rank of every parity run (docs/memory.md §"ZB-H1"): in fp32, bf16 and fp16, on the tiny and the small
// preset at pp 2 and 4, the activation peak, max over the pipeline ranks, is no higher than 1F1B's, and the first
// stage's equals 1F1B's first stage's (it runs 1F1B's list with full backwards and keeps no split-backward state:
// plan::splits_backward).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/run_config.h"
#include "plan/ledger_model.h"
#include "plan/run_plan.h"
#include "preset_config.h"
#include "unity_id.h"

namespace sp::plan {
namespace {
namespace SP_TEST_ID {

// The activation category's peak on every pipeline rank (dp = tp = 1) of `preset` with the overrides.
std::vector<int64_t> activation_peaks(const char* preset, int pp, const std::string& schedule,
                                      const std::string& precision) {
  auto c = sp::test::preset_config(preset, {"parallel.pp=" + std::to_string(pp), "parallel.schedule=" + schedule,
                                            "train.precision=" + precision, "train.steps=5"});
  EXPECT_TRUE(c.ok()) << c.status().message();
  auto plan = RunPlan::make(*c, pp);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  std::vector<int64_t> peaks;
  for (int r = 0; r < pp; ++r)
    peaks.push_back(predict_ledger(ledger_model_input(*plan, {0, 0, r}, c->train.eval_batches))
                        .by_category[static_cast<size_t>(Category::kActivation)]
                        .peak);
  return peaks;
}

int64_t max_of(const std::vector<int64_t>& v) { return *std::max_element(v.begin(), v.end()); }

// ZB-H1's peak activation memory is no higher than 1F1B's (the requirement), in fp32 and in 16 bits
// (where the head's logits are 16-bit too: with fp32 logits the bf16 last stage exceeded it at pp 2 by 6.9 % on
// tiny and 7.8 % on small). A shape condition, not a theorem (docs/memory.md §"ZB-H1").
TEST(LedgerModelZb, ActivationPeakNoHigherThanOneFOneB) {
  for (const char* precision : {"fp32", "bf16", "fp16"})
    for (const char* preset : {"tiny", "small"})
      for (int pp : {2, 4}) {
        const std::vector<int64_t> zb = activation_peaks(preset, pp, "zb-h1", precision);
        const std::vector<int64_t> ofob = activation_peaks(preset, pp, "1f1b", precision);
        const std::string what = fmt::format("{} {} pp {}", precision, preset, pp);
        EXPECT_LE(max_of(zb), max_of(ofob)) << what;
        EXPECT_EQ(zb[0], ofob[0]) << what << ": the first stage is 1F1B's";
        for (int r = 1; r < pp; ++r) EXPECT_GE(zb[r], ofob[r]) << what << " rank " << r;
      }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::plan
