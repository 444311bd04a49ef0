// The two strict field readers and the one TOML parser (issue 30): core/json_io's JsonFields in its input
// contract (a run configuration, a ds_config: optional keys, every problem kept naming the key, its value and
// the rule, exit 2, unread keys refused with the keys that exist), config/toml_fields' parser (file:line:col)
// and TomlFields (array elements named by position, integers whose range the caller words). Closed-form
// expectations: each input's message is written out here.
#include <gtest/gtest.h>

#include "config/toml_fields.h"
#include "core/json_io.h"
#include "unity_id.h"

namespace sp {
namespace {
namespace SP_TEST_ID {

using nlohmann::json;

bool has(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

TEST(JsonFieldsInput, AbsentKeysKeepTheDefaultAndWrongOnesAreNamed) {
  const json j = {{"steps", 5.5}, {"dp", 4}, {"zero", 9}, {"mode", "zigzag"}, {"on", 1}, {"big", 5e8}};
  JsonFields f = JsonFields::input(j, "train");
  EXPECT_FALSE(f.read_integer("absent", 0, 10).has_value());
  EXPECT_TRUE(f.problems().empty()) << "an absent key is no problem";
  EXPECT_EQ(f.read_integer("dp", 1, 8), 4);
  EXPECT_FALSE(f.read_integer("steps", 1, 100).has_value());
  EXPECT_FALSE(f.read_integer("zero", 0, 3).has_value());
  EXPECT_FALSE(f.read_choice("mode", {"gpipe", "1f1b"}).has_value());
  EXPECT_FALSE(f.read_boolean("on").has_value());
  EXPECT_FALSE(f.read_integer("big", 0, int64_t{1} << 40).has_value()) << "5e8 is a float unless the rules coerce";
  ASSERT_EQ(f.problems().size(), 5u);
  EXPECT_EQ(f.problems()[0].message(), "train.steps = 5.5 must be an integer in [1, 100]");
  EXPECT_EQ(f.problems()[1].message(), "train.zero = 9 is out of range [0, 3]");
  EXPECT_EQ(f.problems()[2].message(), "train.mode = \"zigzag\" is not one of: gpipe, 1f1b");
  EXPECT_EQ(f.problems()[3].message(), "train.on = 1 must be true or false");
  EXPECT_EQ(f.first_problem().exit_code(), 2);
  JsonFields coerced = JsonFields::input(j, "", {.whole_floats_are_integers = true});
  EXPECT_EQ(coerced.read_integer("big", 0, int64_t{1} << 40), 500000000);
  EXPECT_FALSE(coerced.read_integer("steps", 1, 100).has_value()) << "5.5 is not whole";
  EXPECT_EQ(coerced.problems().at(0).message(), "steps = 5.5 must be an integer in [1, 100]");
}

TEST(JsonFieldsInput, UnreadKeysAreRefusedWithTheKeysThatExist) {
  const json j = {{"steps", 3}, {"stepz", 3}};
  JsonFields f = JsonFields::input(j, "train");
  EXPECT_EQ(f.read_integer("steps", 1, 9), 3);
  f.read_number("lr", 0, 1);
  f.refuse_unread();
  ASSERT_EQ(f.problems().size(), 1u);
  EXPECT_EQ(f.problems()[0].message(), "unknown key train.stepz");
  EXPECT_EQ(f.problems()[0].hint(), "known keys in [train]: steps, lr");
  JsonFields top = JsonFields::input(j, "");
  top.refuse_unknown({"steps"}, "a reason");
  EXPECT_EQ(top.problems().at(0).message(), "unknown key stepz (a reason)");
  EXPECT_TRUE(has(top.problems().at(0).hint(), "at the top level: steps"));
  EXPECT_EQ(JsonFields::input(json(3), "train").first_problem().message(), "train = 3 must be an object");
}

TEST(TomlParser, ErrorsNameTheOriginLineAndColumn) {
  Result<toml::table> bad = config::parse_toml_text("a = 1\nb = [1,\n", "x.toml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().exit_code(), 2);
  EXPECT_TRUE(has(bad.status().message(), "x.toml:")) << bad.status().message();
  Result<toml::table> twice = config::parse_toml_text("a = 1\na = 2\n", "y.toml");
  ASSERT_FALSE(twice.ok());
  EXPECT_TRUE(has(twice.status().message(), "y.toml:2:")) << twice.status().message();
  Result<toml::table> ok = config::parse_toml_text("n = 3\n[t]\nx = [\"a\", 2.5]\n", "z.toml");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(config::toml_to_json(*ok), json::parse(R"({"n": 3, "t": {"x": ["a", 2.5]}})"));
  EXPECT_FALSE(config::parse_toml_file("/nonexistent/file.toml").ok());
}

TEST(TomlFields, ElementsAndIntegersAreNamed) {
  Result<toml::table> t = config::parse_toml_text("sets = [\"a\", 2]\nworld = \"2\"\nn = 7\n", "c.toml");
  ASSERT_TRUE(t.ok());
  std::vector<std::string> errors;
  config::TomlFields f(&*t, "lab X", "c.toml", &errors);
  EXPECT_FALSE(f.strings("sets").has_value());
  EXPECT_FALSE(f.integer("world", true).has_value());
  EXPECT_EQ(f.integer("n", true), 7);
  EXPECT_FALSE(f.integer("missing", true).has_value());
  f.finish();
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_EQ(errors[0], "c.toml:1: lab X.sets must be an array of strings; element 2 is 2");
  EXPECT_EQ(errors[1], "c.toml:2: lab X.world = \"2\" must be an integer");
  EXPECT_EQ(errors[2], "c.toml:1: lab X.missing: missing field (rule: an integer)");
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp
