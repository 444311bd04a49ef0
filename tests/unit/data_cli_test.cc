// `shardproof data prepare | verify` through the real CLI11 wiring (register_data), as main.cc
// runs it: exit 0 on success, 2 for usage and configuration errors, 1 for a damaged dataset.
#include <gtest/gtest.h>

#include "cli_run.h"
#include "core/file_io.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::cli {
namespace {
namespace SP_TEST_ID {

using sp::test::source_dir;

int run(const std::string& line) { return sp::test::run_command(register_data, line); }

TEST(DataCli, PrepareVerifyAndErrors) {
  const sp::test::TempDir dir;
  const std::string& tmp = dir.path();
  const std::string planted = source_dir() + "/data/planted/sources.json";
  const std::string common = "data prepare --sources " + planted + " --vocab-size 300 --eval-fraction 0.5";
  EXPECT_EQ(run(common + " --out " + tmp + "/out"), 0);
  EXPECT_TRUE(path_exists(tmp + "/out/manifest.json"));
  EXPECT_TRUE(path_exists(tmp + "/out/lineage.jsonl"));
  EXPECT_EQ(run("data verify " + tmp + "/out"), 0);
  EXPECT_EQ(run(common + " --cache-root " + tmp + "/cache"), 0);
  EXPECT_EQ(run(common + " --cache-root " + tmp + "/cache"), 0);  // a verified hit

  EXPECT_EQ(run(common), 2);                                                      // neither --out nor --cache-root
  EXPECT_EQ(run(common + " --out " + tmp + "/a --cache-root " + tmp + "/b"), 2);  // both
  EXPECT_EQ(run("data prepare --out " + tmp + "/c"), 2);                          // --sources is required
  EXPECT_EQ(run("data prepare --sources " + planted + " --vocab-size 100 --out " + tmp + "/d"), 2);
  EXPECT_EQ(run("data prepare --sources " + tmp + "/nope.json --out " + tmp + "/e"), 1);
  EXPECT_EQ(run("data"), 2);

  auto shard = read_file(tmp + "/out/eval-00000.bin");
  ASSERT_TRUE(shard.ok());
  std::string b = *shard;
  b[0] = 'X';
  ASSERT_TRUE(write_file(tmp + "/out/eval-00000.bin", b).ok());
  EXPECT_EQ(run("data verify " + tmp + "/out"), 1);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::cli
