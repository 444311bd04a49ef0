// A recording's records as untrusted input (judge/records.h, docs/formats/torch_recording.md): the big
// hex integers of the exact sums are bounded by the ExactSum limbs before anything is allocated or summed, a
// tensor record is exactly its keys with a cover that matches its count, and a partial built by hand from a
// tensor's exact words merges back into the engine's own summary of that tensor (the assembly's arithmetic).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "core/exact_sum.h"
#include "evidence/tensor_summary.h"
#include "judge/records.h"
#include "unity_id.h"

namespace sp::judge {
namespace {
namespace SP_TEST_ID {

using json = nlohmann::json;

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
  ASSERT_TRUE(parse_rank_record(tensor_record(), "r:1", 0, 1, out).ok());
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
    const Status s = parse_rank_record(j, "r:1", 0, 1, out);
    EXPECT_FALSE(s.ok()) << key << " = " << value.dump();
    EXPECT_NE(s.message().find("r:1"), std::string::npos) << s.message();
  }
  EXPECT_FALSE(parse_rank_record(json{{"kind", "other"}}, "r:2", 0, 2, out).ok());
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
    const Status st = parse_rank_record(j, "r", 0, 1, out);
    ASSERT_TRUE(st.ok()) << st.message();
    evidence::TensorSummary back;
    back.lane0 = out.tensors[0].lane0;
    back.lane1 = out.tensors[0].lane1;
    back.stats = ExactSum::from_words(out.tensors[0].exact_words);
    merged.merge(back);
  }
  EXPECT_EQ(merged.to_json(), whole.to_json());
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::judge
