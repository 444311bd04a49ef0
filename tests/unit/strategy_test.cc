// The one Strategy (plan/strategy.h): every token kind of its grammar, the canonical name round-tripping, the map
// to and from a run configuration, the --set text a child process gets (equal to the typed apply, read through
// the config reader), the reference placed first, and bad names naming their token.
#include "plan/strategy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "preset_config.h"
#include "unity_id.h"

namespace sp::plan {
namespace {
namespace SP_TEST_ID {

TEST(Strategy, TokensSetTheWholeGrid) {
  auto s = parse_strategy("dp2-tp2-pp2-zero1-interleaved4-recompute-fast-mb2");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->world(), 8);
  EXPECT_EQ(s->zero, 1);
  EXPECT_EQ(s->schedule, config::Schedule::kInterleaved);
  EXPECT_EQ(s->virtual_stages, 4);
  EXPECT_EQ(s->recompute, model::Recompute::kFull);
  EXPECT_EQ(s->reduction, config::Reduction::kFast);
  EXPECT_EQ(s->micro_batch_size, 2);
  EXPECT_EQ(strategy_sets(*s, Strategy{}),
            (std::vector<std::string>{"parallel.dp=2", "parallel.tp=2", "parallel.pp=2", "parallel.zero=1",
                                      "parallel.schedule=interleaved", "parallel.virtual_stages=4",
                                      "train.recompute=full", "parallel.reduction=fast", "train.micro_batch_size=2"}));
  EXPECT_EQ(strategy_sets(*parse_strategy("tp2"), Strategy{}),
            (std::vector<std::string>{"parallel.dp=1", "parallel.tp=2", "parallel.pp=1", "parallel.zero=0"}));
  EXPECT_EQ(strategy_sets(*parse_strategy("pp4-gpipe"), Strategy{}).back(), "parallel.virtual_stages=1");
  EXPECT_EQ(parse_strategy("pp2-interleaved")->virtual_stages, 2);
  EXPECT_EQ(parse_strategy("pp2-zbh1")->schedule, config::Schedule::kZbH1);
  EXPECT_EQ(parse_strategy("tp2-selective")->recompute, model::Recompute::kSelective);
  EXPECT_FALSE(parse_strategy("dp2-recompute-selective").ok());  // one recompute mode per name
  EXPECT_TRUE(parse_strategy("tp2-sp")->sequence_parallel);
  EXPECT_FALSE(parse_strategy("tp2-sp-sp").ok());
}

// The grid is fixed by every name; the schedule, recompute, reduction and micro-batch are the base's unless named.
TEST(Strategy, UnnamedFieldsAreTheBases) {
  Strategy base{.dp = 4,
                .tp = 2,
                .zero = 2,
                .schedule = config::Schedule::kGpipe,
                .recompute = model::Recompute::kFull,
                .sequence_parallel = true,
                .reduction = config::Reduction::kFast,
                .micro_batch_size = 4};
  auto s = parse_strategy("pp2", base);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (Strategy{.pp = 2,
                          .schedule = config::Schedule::kGpipe,
                          .recompute = model::Recompute::kFull,
                          .reduction = config::Reduction::kFast,
                          .micro_batch_size = 4}));
  EXPECT_EQ(parse_strategy("pp2-1f1b-mb1", base)->schedule, config::Schedule::k1F1B);
  EXPECT_EQ(parse_strategy("pp2-1f1b-mb1", base)->micro_batch_size, 1);
  // Only what differs from the base reaches a child's --set (the grid always).
  EXPECT_EQ(strategy_sets(*s, base), (std::vector<std::string>{"parallel.dp=1", "parallel.tp=1", "parallel.pp=2",
                                                               "parallel.zero=0", "parallel.sequence_parallel=false"}));
}

TEST(Strategy, CanonicalNamesRoundTrip) {
  const std::vector<Strategy> all = {
      Strategy{},
      Strategy{.dp = 8},
      Strategy{.dp = 2,
               .tp = 4,
               .pp = 2,
               .zero = 1,
               .schedule = config::Schedule::kInterleaved,
               .virtual_stages = 3,
               .recompute = model::Recompute::kSelective,
               .sequence_parallel = true,
               .reduction = config::Reduction::kFast,
               .micro_batch_size = 8},
      Strategy{.pp = 4, .schedule = config::Schedule::kGpipe, .recompute = model::Recompute::kFull},
      Strategy{.pp = 2, .schedule = config::Schedule::kZbH1},
      Strategy{.dp = 4, .servers = 2},
      Strategy{.dp = 3, .tp = 2, .servers = 1, .micro_batch_size = 2},
  };
  std::set<std::string> names;
  for (const Strategy& s : all) {
    const std::string name = strategy_name(s);
    names.insert(name);
    auto back = parse_strategy(name);
    ASSERT_TRUE(back.ok()) << name << ": " << back.status().message();
    EXPECT_EQ(*back, s) << name;
    EXPECT_EQ(strategy_to_json(s)["name"], name);
  }
  EXPECT_EQ(names.size(), all.size());
  EXPECT_EQ(strategy_name(Strategy{}), "dp1");
  EXPECT_EQ(strategy_name(all[2]), "dp2-tp4-pp2-zero1-interleaved3-selective-fast-sp-mb8");
  EXPECT_EQ(strategy_name(all[5]), "ps-w4-s2");
}

// strategy_of and apply map the same fields both ways; the --set text a child gets, read by the config reader
// over the same base, is the configuration apply gives in process.
TEST(Strategy, ApplyIsTheConfigReadersOwnResult) {
  auto base = sp::test::preset_config("tiny", {});
  ASSERT_TRUE(base.ok()) << base.status().message();
  for (const char* name :
       {"dp2-tp2-pp2-zero1-interleaved2-recompute-fast-mb1", "tp2-sp-selective", "ps-w3-s1", "pp4-gpipe-mb4", "dp1"}) {
    auto s = parse_strategy(name, strategy_of(*base));
    ASSERT_TRUE(s.ok()) << name;
    config::RunConfig typed = *base;
    apply(*s, typed);
    EXPECT_EQ(strategy_of(typed), *s) << name;
    auto text = sp::test::preset_config("tiny", strategy_sets(*s, strategy_of(*base)));
    ASSERT_TRUE(text.ok()) << name << ": " << text.status().message();
    EXPECT_EQ(text->to_json(), typed.to_json()) << name;
  }
}

TEST(Strategy, BadTokensAreUsageErrorsNamingTheToken) {
  for (const char* bad : {"dp2-foo", "dp0", "zero4", "interleaved1", "dp2--tp2", "dp2-", "dp2-dp4", "gpipe-1f1b", "tpx",
                          "dp-2", "mb0", ""}) {
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

TEST(Strategy, ParameterServer) {
  auto s = parse_strategy("ps-w4-s2");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->dp, 4);
  EXPECT_EQ(s->servers, 2);
  EXPECT_EQ(s->world(), 6);
  const std::vector<std::string> o = strategy_sets(*s, Strategy{});
  EXPECT_NE(std::find(o.begin(), o.end(), "parallel.architecture=ps"), o.end());
  EXPECT_NE(std::find(o.begin(), o.end(), "parallel.servers=2"), o.end());
  EXPECT_NE(std::find(o.begin(), o.end(), "parallel.dp=4"), o.end());
  for (const char* bad : {"ps-w4", "w4-s1", "ps-dp4-s1", "s1", "ps-w4-s1-s2", "ps-w0-s1"}) {
    auto b = parse_strategy(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().exit_code(), 2) << bad;
  }
}

TEST(Strategy, ReferenceFirstAndDuplicatesDropped) {
  const Strategy reference = *parse_strategy("dp1");
  auto l = parse_strategy_list("tp2, pp2-1f1b,dp2,tp2,dp1-tp1");
  ASSERT_TRUE(l.ok()) << l.status().message();
  std::vector<std::string> labels;
  for (const NamedStrategy& s : with_reference_first(*l, reference)) labels.push_back(s.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"dp1-tp1", "tp2", "pp2-1f1b", "dp2"}));
  auto m = parse_strategy_list("dp2");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(with_reference_first(*m, reference).front().label, "dp1");
  EXPECT_EQ(with_reference_first(*m, reference).size(), 2u);
  EXPECT_NE(*parse_strategy("dp1-recompute"), reference);
  EXPECT_NE(*parse_strategy("dp1-selective"), reference);
  EXPECT_NE(*parse_strategy("tp2-sp"), reference);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::plan
