// The pieces of a logical tensor (judge/shard.h) against a naive twin: local element k of a box is the element at
// (offsets + the row-major coordinates of k in sizes), of a fragment start + k, of [dim, index, parts] the even
// split's box; the runs cover exactly those elements; what parse_shard refuses (a box outside the shape, a negative
// size, a fragment past numel) and what tiling_problem names (a gap, an overlap, with both pieces).
#include <gtest/gtest.h>

#include "judge/shard.h"
#include "unity_id.h"

namespace sp::judge {
namespace {
namespace SP_TEST_ID {

using json = nlohmann::json;

Shard parsed(const json& v, const Shape& shape) {
  auto s = parse_shard(v, shape);
  EXPECT_TRUE(s.ok()) << v.dump() << ": " << s.status().message();
  return s.ok() && s->has_value() ? **s : Shard{};
}

// The naive twin: every logical element of a 2-D box, row-major.
std::vector<int64_t> box_elements(const Shape& shape, const std::vector<int64_t>& o, const std::vector<int64_t>& z) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < z[0]; ++i)
    for (int64_t j = 0; j < z[1]; ++j) out.push_back((o[0] + i) * shape[1] + o[1] + j);
  return out;
}

std::vector<int64_t> run_elements(const Shard& s, const Shape& shape) {
  std::vector<int64_t> out;
  int64_t next_local = 0;
  s.for_each_run(shape, [&](int64_t logical, int64_t local, int64_t count) {
    EXPECT_EQ(local, next_local);
    next_local += count;
    for (int64_t k = 0; k < count; ++k) out.push_back(logical + k);
  });
  return out;
}

TEST(JudgeShard, EveryFormMapsLocalElementsAsItsNaiveTwin) {
  const Shape shape = {10, 6};
  const std::vector<std::tuple<json, std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {json::parse(R"({"offsets": [4, 0], "sizes": [3, 6]})"), {4, 0}, {3, 6}},  // whole rows: one run
      {json::parse(R"({"offsets": [2, 3], "sizes": [5, 2]})"), {2, 3}, {5, 2}},  // a 2-D box: a run per row
      {json::array({1, 2, 3}), {0, 4}, {10, 2}},                                 // columns 2/3
      {json::array({0, 1, 2}), {5, 0}, {5, 6}},                                  // rows 1/2
  };
  for (const auto& [v, o, z] : cases) {
    const Shard s = parsed(v, shape);
    const std::vector<int64_t> want = box_elements(shape, o, z);
    EXPECT_EQ(s.numel(), static_cast<int64_t>(want.size())) << v.dump();
    for (size_t k = 0; k < want.size(); ++k) EXPECT_EQ(s.logical_index(shape, static_cast<int64_t>(k)), want[k]);
    EXPECT_EQ(run_elements(s, shape), want) << v.dump();
  }
  const Shard f = parsed(json::parse(R"({"start": 7, "numel": 20})"), shape);
  EXPECT_EQ(f.logical_index(shape, 5), 12);
  EXPECT_EQ(run_elements(f, shape).size(), 20u);
  EXPECT_EQ(f.cut_dims(shape), std::vector<int>{-1});
  const Shard empty = parsed(json::parse(R"({"offsets": [10, 0], "sizes": [0, 6]})"), shape);
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(run_elements(empty, shape).empty());
  EXPECT_FALSE(parse_shard(json(nullptr), shape)->has_value());
}

TEST(JudgeShard, WhatIsNotAPieceOfTheShapeIsRefusedNamingIt) {
  const Shape shape = {10, 6};
  for (const auto& [v, want] : std::vector<std::pair<std::string, std::string>>{
           {R"({"offsets": [8, 0], "sizes": [3, 6]})", "dim 0 spans [8, 11), outside the tensor's 10 rows"},
           {R"({"offsets": [0, 0], "sizes": [3, -6]})", "dim 1 has size -6"},
           {R"({"offsets": [0], "sizes": [3]})", "one per dim"},
           {R"({"start": 50, "numel": 11})", "elements [50, 61) pass the tensor's 60 elements"},
           {R"({"start": -1, "numel": 1})", "not negative"},
           {R"([0, 1, 3])", "no 3 even pieces along dim 0"},
           {R"([2, 0, 1])", "dim must be 0 or 1"},
           {R"("rows")", "must be null, [dim, index, parts]"}}) {
    const auto s = parse_shard(json::parse(v), shape);
    ASSERT_FALSE(s.ok()) << v;
    EXPECT_NE(s.status().message().find(want), std::string::npos) << s.status().message();
  }
}

TEST(JudgeShard, TilingNamesTheElementsNoPieceOrTwoPiecesHold) {
  const Shape shape = {10, 6};
  const auto box = [&](int64_t r0, int64_t rows) {
    return std::optional<Shard>(parsed(json{{"offsets", {r0, 0}}, {"sizes", {rows, 6}}}, shape));
  };
  EXPECT_EQ(tiling_problem(shape, {{box(0, 4), 0}, {box(4, 4), 1}, {box(8, 2), 2}}), "");
  EXPECT_EQ(tiling_problem(shape, {{std::nullopt, 0}}), "");
  EXPECT_EQ(tiling_problem(shape, {{box(0, 4), 0}, {box(5, 5), 1}}),
            "logical elements [24, 30) (from row 4, column 0) are in no piece");
  EXPECT_EQ(tiling_problem(shape, {{box(0, 5), 0}, {box(4, 6), 1}}),
            "logical elements [24, 30) (from row 4, column 0) are in two pieces: rank 0's box [0, 0]+[5, 6] and "
            "rank 1's box [4, 0]+[6, 6]");
  EXPECT_EQ(tiling_problem(shape, {{box(0, 9), 0}}),
            "logical elements [54, 60) (from row 9, column 0) are in no piece");
  const auto frag = [&](int64_t start, int64_t n) {
    return std::optional<Shard>(parsed(json{{"start", start}, {"numel", n}}, shape));
  };
  EXPECT_EQ(tiling_problem(shape, {{frag(0, 33), 0}, {frag(33, 27), 1}}), "");
  EXPECT_NE(tiling_problem(shape, {{frag(0, 32), 0}, {frag(33, 27), 1}}).find("[32, 33)"), std::string::npos);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::judge
