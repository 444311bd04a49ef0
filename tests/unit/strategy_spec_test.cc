// The `shardproof compare --strategies` grammar (plan/strategy_spec.h): every token kind, the
// overrides each spec turns into, the reference placed first, and bad specs naming their token.
#include "plan/strategy_spec.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "unity_id.h"

namespace sp::plan {
namespace {
namespace SP_TEST_ID {

TEST(StrategySpec, TokensSetTheWholeGrid) {
  auto s = parse_strategy("dp2-tp2-pp2-zero1-interleaved4-recompute-fast");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->world(), 8);
  EXPECT_EQ(s->zero, 1);
  EXPECT_EQ(s->schedule, "interleaved");
  EXPECT_EQ(s->virtual_stages, 4);
  EXPECT_EQ(s->overrides(),
            (std::vector<std::string>{"parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "parallel.zero=1",
                                      "parallel.schedule=interleaved", "parallel.virtual_stages=4",
                                      "train.recompute=full", "parallel.reduction=fast"}));
  auto t = parse_strategy("tp2");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->overrides(),
            (std::vector<std::string>{"parallel.dp=1", "parallel.tp=2", "parallel.pp=1", "parallel.zero=0"}));
  auto g = parse_strategy("pp4-gpipe");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->overrides().back(), "parallel.virtual_stages=1");
  EXPECT_EQ(parse_strategy("pp2-interleaved")->virtual_stages, 2);
  EXPECT_TRUE(parse_strategy("dp1")->is_reference());
  EXPECT_FALSE(parse_strategy("dp1-recompute")->is_reference());
  EXPECT_FALSE(parse_strategy("dp1-selective")->is_reference());
  EXPECT_EQ(parse_strategy("tp2-selective")->overrides().back(), "train.recompute=selective");
  EXPECT_FALSE(parse_strategy("dp2-recompute-selective").ok());  // one recompute mode per spec
  auto sp = parse_strategy("tp2-sp");
  ASSERT_TRUE(sp.ok());
  EXPECT_EQ(sp->overrides().back(), "parallel.sequence_parallel=true");
  EXPECT_FALSE(sp->is_reference());
  EXPECT_FALSE(parse_strategy("tp2-sp-sp").ok());
}

TEST(StrategySpec, BadTokensAreUsageErrorsNamingTheToken) {
  for (const char* bad :
       {"dp2-foo", "dp0", "zero4", "interleaved1", "dp2--tp2", "dp2-", "dp2-dp4", "gpipe-1f1b", "tpx", "dp-2", ""}) {
    auto s = parse_strategy(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().exit_code(), 2) << bad;
    EXPECT_NE(s.status().hint().find("dpN"), std::string::npos) << bad;  // lists the valid tokens
  }
  auto s = parse_strategy_list("dp1,dp2-foo");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("'foo'"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("dp2-foo"), std::string::npos);
}

TEST(StrategySpec, ParameterServer) {
  auto s = parse_strategy("ps-w4-s2");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->dp, 4);
  EXPECT_EQ(s->servers, 2);
  EXPECT_EQ(s->world(), 6);
  EXPECT_FALSE(s->is_reference());
  const std::vector<std::string> o = s->overrides();
  EXPECT_NE(std::find(o.begin(), o.end(), "parallel.architecture=ps"), o.end());
  EXPECT_NE(std::find(o.begin(), o.end(), "parallel.servers=2"), o.end());
  EXPECT_NE(std::find(o.begin(), o.end(), "parallel.dp=4"), o.end());
  for (const char* bad : {"ps-w4", "w4-s1", "ps-dp4-s1", "s1", "ps-w4-s1-s2", "ps-w0-s1"}) {
    auto b = parse_strategy(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().exit_code(), 2) << bad;
  }
}

TEST(StrategySpec, ReferenceFirstAndDuplicatesDropped) {
  auto l = parse_strategy_list("tp2, pp2-1f1b,dp2,tp2,dp1");
  ASSERT_TRUE(l.ok()) << l.status().message();
  std::vector<std::string> labels;
  for (const StrategySpec& s : with_reference_first(*l)) labels.push_back(s.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"dp1", "tp2", "pp2-1f1b", "dp2"}));
  auto m = parse_strategy_list("dp2");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(with_reference_first(*m).front().label, "dp1");
  EXPECT_EQ(with_reference_first(*m).size(), 2u);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::plan
