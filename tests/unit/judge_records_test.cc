// A recording's records as untrusted input (judge/records.h, docs/formats/torch_recording.md): the big
// hex integers of the exact sums are bounded by the ExactSum limbs before anything is allocated or summed, a
// tensor record is exactly its keys with a cover that matches its count, and a partial built by hand from a
// tensor's exact words merges back into the engine's own summary of that tensor (the assembly's arithmetic).
// A diverged run's numbers are text in format 2 (never in format 1); a strategy's name may not say another
// strategy; a schedule declared as data gives Hugging Face's values.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "core/exact_sum.h"
#include "evidence/tensor_summary.h"
#include "judge/recording.h"
#include "judge/records.h"
#include "unity_id.h"

namespace sp::judge {
namespace {
namespace SP_TEST_ID {

using json = nlohmann::json;
const ShapeMap kShapes = {{"model.norm.weight", {4}}};

json tensor_record() {
  return json::parse(R"({"kind":"tensor","step":0,"phase":"grad","tensor":"model.norm.weight","shard":null,
    "numel":4,"local":4,"cover":[0,4],"lanes":["0000000000000001","0000000000000002"],"sum":"-1f","sq":"3a",
    "count":4,"nan":0,"inf":0,"absmax":0.5,"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"})");
}

TEST(JudgeRecords, HexIntegersAreBoundedByTheirLimbs) {
  std::vector<uint64_t> limbs;
  bool negative = false;
  EXPECT_TRUE(hex_to_limbs("-1f", 2, limbs, negative, true));
  EXPECT_TRUE(negative);
  EXPECT_EQ(limbs, (std::vector<uint64_t>{0x1f, 0}));
  EXPECT_TRUE(hex_to_limbs("123456789", 2, limbs, negative, false));
  EXPECT_EQ(limbs, (std::vector<uint64_t>{0x23456789, 0x1}));
  EXPECT_FALSE(hex_to_limbs("123456789", 1, limbs, negative, false));  // 36 bits in one 32-bit limb
  EXPECT_FALSE(hex_to_limbs("-1", 1, limbs, negative, false));         // no sign where none is allowed
  EXPECT_FALSE(hex_to_limbs("1G", 1, limbs, negative, false));
  EXPECT_FALSE(hex_to_limbs("", 1, limbs, negative, true));
  EXPECT_FALSE(hex_to_limbs(std::string(8 * ExactSum::kSumLimbs + 1, 'f'), ExactSum::kSumLimbs, limbs, negative, true));
}

TEST(JudgeRecords, ATensorRecordIsExactlyItsKeys) {
  RankRecords out;
  ASSERT_TRUE(parse_rank_record(tensor_record(), "r:1", 0, 1, kRecordingFormatVersion, kShapes, out).ok());
  ASSERT_EQ(out.tensors.size(), 1u);
  EXPECT_EQ(out.tensors[0].lane1, 2u);
  for (const auto& [key, value] : std::vector<std::pair<std::string, json>>{{"count", 3},
                                                                            {"cover", json::array({0, 5})},
                                                                            {"absmax", -1.0},
                                                                            {"absmax", 0.1},  // not a float32 value
                                                                            {"sum", "-"},
                                                                            {"lanes", json::array({"1", "2"})},
                                                                            {"phase", "loss"},
                                                                            {"shard", json::array({2, 0, 1})},
                                                                            {"local", 3},
                                                                            {"extra", 1}}) {
    json j = tensor_record();
    j[key] = value;
    const Status s = parse_rank_record(j, "r:1", 0, 1, kRecordingFormatVersion, kShapes, out);
    EXPECT_FALSE(s.ok()) << key << " = " << value.dump();
    EXPECT_NE(s.message().find("r:1"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(parse_rank_record(json{{"kind", "other"}}, "r:2", 0, 2, kRecordingFormatVersion, kShapes, out).ok());
}

// The partial of a tensor, written as the recorder writes it (Σx as one signed hex integer of the exact
// fixed-point value, Σx² as one), read back and merged: the engine's summary of the whole tensor, bit for bit.
// Each part holds values of one sign, so its Σx is the engine's positive or negative limbs as they are.
TEST(JudgeRecords, PartialsMergeIntoTheEnginesSummary) {
  const std::vector<float> x = {1.5f, 3e-40f, 0.1f, -2.25f, -7e30f, -0.0f};
  evidence::TensorSummary whole, merged;
  whole.add_contiguous(x.data(), static_cast<int64_t>(x.size()), 0);
  auto hex = [](const uint64_t* limbs, size_t n) {
    std::string s;
    for (size_t i = n; i-- > 0;) s += fmt::format("{:08x}", limbs[i]);
    return s.substr(std::min(s.find_first_not_of('0'), s.size() - 1));
  };
  for (const auto& [k0, k1, negative] : {std::tuple<int64_t, int64_t, bool>{0, 3, false}, {3, 6, true}}) {
    evidence::TensorSummary part;
    part.add_contiguous(x.data() + k0, k1 - k0, k0);
    const std::vector<uint64_t> w = part.stats.to_words();
    json j = tensor_record();
    j["numel"] = 6, j["local"] = 6, j["cover"] = {k0, k1}, j["count"] = k1 - k0;
    j["sum"] = (negative ? "-" : "") + hex(w.data() + (negative ? ExactSum::kSumLimbs : 0), ExactSum::kSumLimbs);
    j["sq"] = hex(w.data() + 2 * ExactSum::kSumLimbs, ExactSum::kSqLimbs);
    j["absmax"] = static_cast<double>(part.stats.absmax());
    j["lanes"] = {fmt::format("{:016x}", part.lane0), fmt::format("{:016x}", part.lane1)};
    RankRecords out;
    const Status st = parse_rank_record(j, "r", 0, 1, kRecordingFormatVersion, kShapes, out);
    ASSERT_TRUE(st.ok()) << st.message();
    evidence::TensorSummary back;
    back.lane0 = out.tensors[0].lane0;
    back.lane1 = out.tensors[0].lane1;
    back.stats = ExactSum::from_words(out.tensors[0].exact_words);
    merged.merge(back);
  }
  EXPECT_EQ(merged.to_json(), whole.to_json());
}

json step_record() {
  return json::parse(R"({"kind":"step","step":0,"lr":0.001,"grad_norm":"nan","tokens":[0],"group_lr":["inf"],
    "losses":[{"index":0,"targets":3,"loss_sum":"nan","objective":"-inf"}]})");
}

TEST(JudgeRecords, ADivergedStepIsEvidenceInFormat2Only) {
  RankRecords out;
  const Status s = parse_rank_record(step_record(), "r:1", 0, 1, kRecordingFormatVersion, kShapes, out);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(std::isnan(*out.steps[0].grad_norm));
  EXPECT_TRUE(std::isnan(out.steps[0].losses[0].loss_sum));
  EXPECT_EQ(out.steps[0].losses[0].objective, -INFINITY);
  EXPECT_TRUE(out.steps[0].has_group_lr);
  EXPECT_EQ(out.steps[0].group_lr, std::vector<double>{INFINITY});
  json j = step_record();
  j["lr"] = "NaN";  // only the recorder's three spellings
  EXPECT_FALSE(parse_rank_record(j, "r:1", 0, 1, kRecordingFormatVersion, kShapes, out).ok());
  j = step_record();
  j.erase("group_lr");
  RankRecords v1;
  const Status old = parse_rank_record(j, "r:1", 0, 1, kRecordingAnchorsVersion, kShapes, v1);
  EXPECT_FALSE(old.ok());
  EXPECT_NE(old.message().find("grad_norm"), std::string::npos) << old.message();
}

TEST(JudgeRecords, AStrategysNameSaysNoOtherStrategy) {
  EXPECT_EQ(strategy_name_problem("ddp", 2, 1, 1, 0), "");
  EXPECT_EQ(strategy_name_problem("my-run_7", 2, 2, 1, 0), "");  // the user's words are not read
  EXPECT_EQ(strategy_name_problem("dp-tp", 2, 2, 1, 0), "");
  EXPECT_EQ(strategy_name_problem("zero1", 2, 1, 1, 1), "");
  EXPECT_NE(strategy_name_problem("fsdp-full-shard", 2, 1, 1, 0).find("ZeRO stage 2 or 3"), std::string::npos);
  EXPECT_EQ(strategy_name_problem("fsdp2-zero2", 2, 1, 1, 2), "");  // FSDP2, reshard_after_forward=False
  EXPECT_EQ(strategy_name_problem("fsdp2-zero3-tp2", 2, 2, 1, 3), "");
  EXPECT_NE(strategy_name_problem("full-shard", 2, 1, 1, 2).find("ZeRO stage 3"), std::string::npos);
  EXPECT_NE(strategy_name_problem("DDP+TP", 2, 1, 1, 0).find("tp = 1"), std::string::npos);
  EXPECT_NE(strategy_name_problem("single", 2, 1, 1, 0).find("2 ranks"), std::string::npos);
  EXPECT_NE(strategy_name_problem("pp", 2, 1, 1, 0).find("pp = 1"), std::string::npos);
}

// Hugging Face's get_cosine_schedule_with_warmup(opt, 10, 100) and get_linear_schedule_with_warmup(opt, 10, 100)
// at base lr 1, evaluated in Python (transformers/optimization.py), and the constant schedule after its warmup.
TEST(JudgeRecords, SchedulesAreHuggingFacesFormulas) {
  LrSchedule cosine{.kind = "cosine", .lr = 1.0, .warmup_steps = 10, .total_steps = 100};
  EXPECT_EQ(cosine.at(0), 0.0);
  EXPECT_EQ(cosine.at(5), 0.5);
  EXPECT_EQ(cosine.at(10), 1.0);
  EXPECT_NEAR(cosine.at(55), 0.5, 1e-15);
  EXPECT_NEAR(cosine.at(40), 0.5 * (1.0 + std::cos(M_PI * 30.0 / 90.0)), 1e-15);
  EXPECT_EQ(cosine.at(100), 0.0);
  LrSchedule linear{.kind = "linear", .lr = 2.0, .warmup_steps = 10, .total_steps = 100};
  EXPECT_EQ(linear.at(55), 2.0 * 45.0 / 90.0);
  EXPECT_EQ(linear.at(120), 0.0);
  LrSchedule from_one{.kind = "constant", .lr = 1.0, .warmup_steps = 4, .total_steps = 8, .warmup_start = 1};
  EXPECT_EQ(from_one.at(0), 0.25);
  EXPECT_EQ(from_one.at(3), 1.0);
  EXPECT_EQ(from_one.at(7), 1.0);
  LrSchedule floor{.kind = "cosine", .lr = 1.0, .min_ratio = 0.1, .warmup_steps = 0, .total_steps = 10};
  EXPECT_NEAR(floor.at(10), 0.1, 1e-15);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::judge
