// ProcessGrid arithmetic, group naming, topology.json validation and the count-splitting helpers,
// all without MPI. The oracle is the grid equation written out independently in each test
// (rank = c[a0] + s[a0]·(c[a1] + s[a1]·c[a2])) and the worked example in process_grid.h.
#include "comm/process_grid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "comm/deterministic.h"
#include "comm/topology.h"
#include "unity_id.h"

namespace sp::comm {
namespace {
namespace SP_TEST_ID {

ProcessGrid grid_or_die(int dp, int tp, int pp, std::string_view order = ProcessGrid::kDefaultOrder) {
  Result<ProcessGrid> g = ProcessGrid::create(dp, tp, pp, order, dp * tp * pp);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return *g;
}

TEST(ProcessGrid, DefaultOrderMatchesMegatronEquationAndWorkedExample) {
  const ProcessGrid g = grid_or_die(2, 2, 2);
  EXPECT_EQ(g.order_string(), "tp-dp-pp");
  for (int pp = 0; pp < 2; ++pp)
    for (int dp = 0; dp < 2; ++dp)
      for (int tp = 0; tp < 2; ++tp) {
        const int rank = tp + 2 * (dp + 2 * pp);
        EXPECT_EQ(g.rank_of({dp, tp, pp}), rank);
        EXPECT_EQ(g.coords_of(rank), (Coords{dp, tp, pp}));
      }
  // The table in process_grid.h.
  EXPECT_EQ(g.coords_of(2).to_string(), "dp1.tp0.pp0");
  EXPECT_EQ(g.coords_of(5).to_string(), "dp0.tp1.pp1");
  EXPECT_EQ(g.group_of(Axis::kTp, 3), (std::vector<int>{2, 3}));
  EXPECT_EQ(g.group_of(Axis::kDp, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(g.group_of(Axis::kPp, 2), (std::vector<int>{2, 6}));
  EXPECT_EQ(g.group_name(Axis::kDp, 5), "dp[tp1.pp1]");
  EXPECT_EQ(g.group_name(Axis::kTp, 2), "tp[dp1.pp0]");
  EXPECT_EQ(g.group_name(Axis::kPp, 1), "pp[dp0.tp1]");
  EXPECT_EQ(g.all_groups(Axis::kDp), (std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(g.all_groups(Axis::kTp), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(g.all_groups(Axis::kPp), (std::vector<std::vector<int>>{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(ProcessGrid, EveryOrderIsABijectionWithItsEquation) {
  const std::vector<std::string> orders = {"tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"};
  for (const std::string& order : orders) {
    const ProcessGrid g = grid_or_die(3, 2, 4, order);
    const std::array<Axis, 3> axes = *parse_axis_order(order);
    EXPECT_EQ(g.order_string(), order);
    std::set<int> seen;
    for (int rank = 0; rank < g.world_size(); ++rank) {
      const Coords c = g.coords_of(rank);
      // Independent evaluation of the equation for this order.
      const int expected = c[axes[0]] + g.size(axes[0]) * (c[axes[1]] + g.size(axes[1]) * c[axes[2]]);
      EXPECT_EQ(expected, rank) << order;
      EXPECT_EQ(g.rank_of(c), rank) << order;
      seen.insert(rank);
    }
    EXPECT_EQ(seen.size(), 24u);
  }
}

TEST(ProcessGrid, GroupsShareOtherCoordinatesAndPartitionTheWorld) {
  for (const auto& [dp, tp, pp] : std::vector<std::array<int, 3>>{{4, 1, 1}, {2, 3, 2}, {1, 1, 1}, {1, 4, 3}}) {
    const ProcessGrid g = grid_or_die(dp, tp, pp, "pp-dp-tp");
    for (Axis a : kAllAxes) {
      std::vector<int> count(static_cast<size_t>(g.world_size()), 0);
      const auto groups = g.all_groups(a);
      EXPECT_EQ(static_cast<int>(groups.size()), g.world_size() / g.size(a));
      for (size_t i = 0; i < groups.size(); ++i) {
        const std::vector<int>& group = groups[i];
        ASSERT_EQ(static_cast<int>(group.size()), g.size(a));
        if (i > 0) {
          EXPECT_LT(groups[i - 1][0], group[0]) << "groups ordered by first rank";
        }
        for (int k = 0; k < g.size(a); ++k) {
          const int r = group[static_cast<size_t>(k)];
          ++count[static_cast<size_t>(r)];
          EXPECT_EQ(g.coords_of(r)[a], k) << "axis-rank order";
          EXPECT_EQ(g.group_of(a, r), group);
          EXPECT_EQ(g.group_name(a, r), g.group_name(a, group[0]));
          for (Axis other : kAllAxes) {
            if (other != a) {
              EXPECT_EQ(g.coords_of(r)[other], g.coords_of(group[0])[other]);
            }
          }
        }
      }
      for (int c : count) EXPECT_EQ(c, 1) << "every rank in exactly one group on " << axis_name(a);
    }
  }
}

TEST(ProcessGrid, RejectsBadConfigurationsWithTheFullEquation) {
  Result<ProcessGrid> g = ProcessGrid::create(2, 2, 2, "tp-dp-pp", 6);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().exit_code(), 2);
  EXPECT_NE(g.status().message().find("world size 6 ≠ dp 2 × tp 2 × pp 2 = 8"), std::string::npos)
      << g.status().message();
  EXPECT_NE(g.status().hint().find("-np 8"), std::string::npos);
  for (const auto& [dp, tp, pp] : std::vector<std::array<int, 3>>{{0, 1, 1}, {1, -1, 1}, {1, 1, 0}}) {
    Result<ProcessGrid> bad = ProcessGrid::create(dp, tp, pp, "tp-dp-pp", 1);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("must be at least 1"), std::string::npos);
  }
  for (const char* order : {"", "tp-dp", "tp-tp-pp", "tp-dp-pp-", "tp-dp-xx", "tp_dp_pp", "tp-dp-pp-dp", "TP-DP-PP"}) {
    Result<ProcessGrid> bad = ProcessGrid::create(1, 1, 1, order, 1);
    ASSERT_FALSE(bad.ok()) << order;
    EXPECT_NE(bad.status().message().find("not a permutation"), std::string::npos) << order;
  }
}

std::vector<RankInfo> fake_ranks(const ProcessGrid& g) {
  std::vector<RankInfo> ranks;
  for (int r = 0; r < g.world_size(); ++r)
    ranks.push_back({.world_rank = r, .coords = g.coords_of(r), .host = "node0", .pid = 100 + r, .cpu_affinity = {r}});
  return ranks;
}

TEST(Topology, WrittenDocumentValidatesAndRoundTripsTheGrid) {
  const ProcessGrid g = grid_or_die(2, 2, 2, "dp-tp-pp");
  const nlohmann::json t = topology_json(g, fake_ranks(g));
  ASSERT_TRUE(validate_topology(t).ok()) << validate_topology(t).to_string();
  const ProcessGrid back = *grid_from_topology(t);
  EXPECT_EQ(back.order_string(), "dp-tp-pp");
  EXPECT_EQ(back.world_size(), 8);
  EXPECT_EQ(t["groups"]["tp"], nlohmann::json(g.all_groups(Axis::kTp)));
  EXPECT_EQ(t["ranks"][3]["coords"]["tp"], g.coords_of(3).tp);
  const RankInfo local = local_rank_info(g, 5);
  EXPECT_EQ(local.coords, g.coords_of(5));
  EXPECT_GT(local.pid, 0);
  EXPECT_FALSE(local.cpu_affinity.empty());
}

TEST(Topology, ValidatorNamesTheBrokenKey) {
  const ProcessGrid g = grid_or_die(2, 2, 1);
  const nlohmann::json good = topology_json(g, fake_ranks(g));
  struct Case {
    std::function<void(nlohmann::json&)> mutate;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](nlohmann::json& t) { t["world_size"] = 5; }, "world size 5 ≠ dp 2 × tp 2 × pp 1 = 4"},
      {[](nlohmann::json& t) { t["world_size"] = "4"; }, "world_size is missing or not an integer"},
      {[](nlohmann::json& t) { t.erase("dp"); }, "dp is missing"},
      {[](nlohmann::json& t) { t["axis_order"] = "tp-tp-pp"; }, "not a permutation"},
      {[](nlohmann::json& t) { t["format_version"] = 7; }, "format_version 7"},
      {[](nlohmann::json& t) { t["ranks"].erase(3); }, "ranks has 3 entries"},
      {[](nlohmann::json& t) { t["ranks"][2]["world_rank"] = 1; }, "ranks[2].world_rank 1 appears twice"},
      {[](nlohmann::json& t) { t["ranks"][1]["coords"]["tp"] = 0; }, "ranks[1].coords.tp = 0"},
      {[](nlohmann::json& t) { t["ranks"][1]["coords"]["dp"] = 9; }, "ranks[1].coords.dp = 9 is outside"},
      {[](nlohmann::json& t) { t["ranks"][0]["host"] = 3; }, "ranks[0].host"},
      {[](nlohmann::json& t) {
         t["groups"]["dp"][1] = {1, 2};
       },
       "groups.dp[1] = [1,2]"},
      {[](nlohmann::json& t) { t["groups"].erase("pp"); }, "groups.pp is missing"},
      {[](nlohmann::json& t) { t = nlohmann::json::array(); }, "not a JSON object"},
  };
  for (const Case& c : cases) {
    nlohmann::json t = good;
    c.mutate(t);
    const Status s = validate_topology(t);
    ASSERT_FALSE(s.ok()) << c.expect;
    EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.message();
  }
}

TEST(CountSplit, EvenSplitAndScratchSizes) {
  EXPECT_EQ(even_split_counts(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(even_split_counts(3, 4), (std::vector<int64_t>{1, 1, 1, 0}));
  EXPECT_EQ(even_split_counts(0, 2), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(deterministic_all_reduce_scratch(10, 4), 12);
  EXPECT_EQ(deterministic_all_reduce_scratch(8, 4), 8);
  EXPECT_EQ(deterministic_all_reduce_scratch(7, 1), 7);
  const std::vector<int64_t> counts = {5, 0, 2};
  EXPECT_EQ(deterministic_reduce_scatter_scratch(counts, 0), 15);
  EXPECT_EQ(deterministic_reduce_scatter_scratch(counts, 1), 0);
  for (int64_t total : {0, 1, 7, 1000, 1001})
    for (int parts : {1, 2, 3, 8}) {
      const std::vector<int64_t> c = even_split_counts(total, parts);
      int64_t sum = 0;
      for (int64_t x : c) sum += x;
      EXPECT_EQ(sum, total);
      EXPECT_LE(*std::max_element(c.begin(), c.end()) - *std::min_element(c.begin(), c.end()), 1);
      // The scratch of every rank fits the size the all-reduce asks for.
      for (int r = 0; r < parts; ++r)
        EXPECT_LE(parts * c[static_cast<size_t>(r)], deterministic_all_reduce_scratch(total, parts));
    }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::comm
