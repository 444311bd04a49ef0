// The shared test helpers (tests/support/temp_dir.h) that every file-writing test relies on: two
// TempDirs never share a path, each starts empty (a stale directory of the same name is cleared), and
// destruction removes it with its contents; source_dir() is the tree holding this file.
#include "temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "unity_id.h"

namespace sp::test {
namespace {
namespace SP_TEST_ID {
namespace fs = std::filesystem;

TEST(TempDir, UniqueEmptyAndRemovedWithItsContents) {
  std::string a_path;
  {
    const TempDir a;
    const TempDir b("tagged");
    a_path = a.path();
    EXPECT_NE(a.path(), b.path());
    EXPECT_TRUE(fs::is_directory(a.path()));
    EXPECT_TRUE(fs::is_empty(a.path()));
    EXPECT_NE(b.path().find("sp_tagged_" + std::to_string(::getpid()) + "_"), std::string::npos) << b.path();
    EXPECT_EQ(a.file("x/y.bin"), a.path() + "/x/y.bin");
    fs::create_directories(a.file("x"));
    std::ofstream(a.file("x/y.bin")) << "data";
    EXPECT_TRUE(fs::exists(a.file("x/y.bin")));
  }
  EXPECT_FALSE(fs::exists(a_path));
}

TEST(TempDir, TheNamingRuleIsSharedAndClearsAStaleDirectory) {
  EXPECT_EQ(temp_path("tag", 42), fs::temp_directory_path() / "sp_tag_42");
  // A directory left by a crashed process with the name the next TempDir will take is emptied first.
  const TempDir probe("stale");
  const std::string next = probe.path().substr(0, probe.path().rfind('_') + 1) +
                           std::to_string(std::stoll(probe.path().substr(probe.path().rfind('_') + 1)) + 1);
  fs::create_directories(next);
  std::ofstream(next + "/leftover") << "x";
  const TempDir fresh("stale");
  ASSERT_EQ(fresh.path(), next);
  EXPECT_TRUE(fs::is_empty(fresh.path()));
}

TEST(SourceDir, IsThisTree) {
  EXPECT_TRUE(fs::exists(source_dir() + "/tests/support/temp_dir.h")) << source_dir();
  EXPECT_TRUE(fs::exists(source_dir() + "/configs/tiny.toml")) << source_dir();
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::test
