// train.gemm32 = "auto" (kernels/gemm32_probe.h, gemm32_auto.h):
//  - the pick rule on closed cases (the margin; a tie or a missing time keeps OpenBLAS);
//  - the probe on this host: both backends timed, the rounds and threads it was asked for, the thread left set;
//  - the host key names the CPU, both libraries and the thread count;
//  - the cache: a first call measures and writes this host's entry; an entry edited to either backend is what
//    "auto" then resolves to, without measuring (the file decides, not this host's timing); another host's entry
//    is kept beside it; a damaged file is replaced; a cache that cannot be written still gives a pick, said so.
#include "kernels/gemm32_auto.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/file_io.h"
#include "core/json_io.h"
#include "unity_id.h"

namespace sp::kernels {
namespace {
namespace SP_TEST_ID {

Gemm32Probe times(double openblas_ms, double onednn_ms) {
  Gemm32Probe p;
  p.openblas_s = openblas_ms / 1e3;
  p.onednn_s = onednn_ms / 1e3;
  p.rounds = 7;
  return p;
}

TEST(Gemm32Auto, PickRule) {
  EXPECT_EQ(gemm32_pick(times(100, 96)), Gemm32Kind::kOneDnn);    // 4 % faster
  EXPECT_EQ(gemm32_pick(times(100, 97)), Gemm32Kind::kOneDnn);    // exactly the margin
  EXPECT_EQ(gemm32_pick(times(100, 98)), Gemm32Kind::kOpenBlas);  // 2 %: a tie keeps the project's BLAS
  EXPECT_EQ(gemm32_pick(times(100, 100)), Gemm32Kind::kOpenBlas);
  EXPECT_EQ(gemm32_pick(times(100, 150)), Gemm32Kind::kOpenBlas);
  EXPECT_EQ(gemm32_pick(times(100, 0)), Gemm32Kind::kOpenBlas);  // nothing measured: no pick of oneDNN
  EXPECT_EQ(gemm32_pick(times(0, 50)), Gemm32Kind::kOpenBlas);
}

TEST(Gemm32Auto, ProbeAndHostKey) {
  const Gemm32Probe p = probe_gemm32(1, 3);
  EXPECT_GT(p.openblas_s, 0.0);
  EXPECT_GT(p.onednn_s, 0.0);
  EXPECT_EQ(p.rounds, 3);
  EXPECT_EQ(p.threads, 1);
  EXPECT_TRUE(p.cpu_time);
  EXPECT_EQ(blas_threads(), 1);
  const std::string key = gemm32_host_key(1);
  for (const char* part : {"family", "openblas-", "onednn-", "1 thread"})
    EXPECT_NE(key.find(part), std::string::npos) << part << " in " << key;
  EXPECT_NE(gemm32_host_key(2), key) << "the pick depends on the thread count";
}

class Gemm32Cache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("gemm32_auto_test." + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    file_ = (dir_ / "sub" / "gemm32.json").string();
    set_gemm32_cache_file(file_);
  }
  void TearDown() override {
    set_gemm32_cache_file("");
    std::filesystem::remove_all(dir_);
  }
  nlohmann::json read() const { return *read_json_file(file_); }
  void write(const nlohmann::json& j) const {
    std::filesystem::create_directories(std::filesystem::path(file_).parent_path());
    ASSERT_TRUE(write_file(file_, j.dump()).ok());
  }
  std::filesystem::path dir_;
  std::string file_;
};

TEST_F(Gemm32Cache, MeasuredOnceThenTheFileDecides) {
  const auto first = gemm32_auto(1);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  EXPECT_NE(first->origin.find("measured now"), std::string::npos) << first->origin;
  nlohmann::json doc = read();
  const std::string key = gemm32_host_key(1);
  ASSERT_TRUE(doc["hosts"].contains(key)) << doc.dump(2);
  EXPECT_EQ(doc["hosts"][key]["pick"], gemm32_kind_name(first->kind));
  EXPECT_GT(doc["hosts"][key]["openblas_ms"].get<double>(), 0.0);
  EXPECT_EQ(*resolve_gemm32(Gemm32Kind::kAuto, 1), first->kind) << "memoized in the process";
  // The entry edited to each backend in turn: "auto" follows the file, whatever this host would measure.
  for (const Gemm32Kind want : {Gemm32Kind::kOneDnn, Gemm32Kind::kOpenBlas}) {
    doc["hosts"][key]["pick"] = gemm32_kind_name(want);
    doc["hosts"]["another host; 1 thread"] = {{"pick", "onednn"}};
    write(doc);
    set_gemm32_cache_file(file_);  // forgets the process's memo
    const auto again = gemm32_auto(1);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->kind, want);
    EXPECT_NE(again->origin.find("cached in " + file_), std::string::npos) << again->origin;
    EXPECT_EQ(*resolve_gemm32(Gemm32Kind::kAuto, 1), want);
  }
  EXPECT_EQ(*resolve_gemm32(Gemm32Kind::kOpenBlas, 1), Gemm32Kind::kOpenBlas) << "a pin is never looked up";
  EXPECT_EQ(*resolve_gemm32(Gemm32Kind::kOneDnn, 1), Gemm32Kind::kOneDnn);
}

// Another process holding the cache's lock (a probe stopped, traced or under valgrind) delays a run by the lock wait
// at most: the pick is measured and not written, and said so. flock locks per open file, so a second open here
// contends like another process.
TEST_F(Gemm32Cache, ALockHeldElsewhereIsWaitedForBoundedly) {
  std::filesystem::create_directories(std::filesystem::path(file_).parent_path());
  const int fd = ::open((file_ + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  set_gemm32_lock_wait(0.2);
  const auto a = gemm32_auto(1);
  set_gemm32_lock_wait(60);
  ::close(fd);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_NE(a->origin.find("not cached"), std::string::npos) << a->origin;
  EXPECT_FALSE(std::filesystem::exists(file_)) << "nothing written without the lock";
}

TEST_F(Gemm32Cache, OtherHostsKeptDamagedReplacedUnwritableSaid) {
  write({{"format", "shardproof fp32 GEMM picks"}, {"version", 1}, {"hosts", {{"elsewhere", {{"pick", "onednn"}}}}}});
  ASSERT_TRUE(gemm32_auto(1).ok());
  nlohmann::json doc = read();
  EXPECT_TRUE(doc["hosts"].contains("elsewhere")) << "another host's pick is kept";
  EXPECT_TRUE(doc["hosts"].contains(gemm32_host_key(1)));

  ASSERT_TRUE(write_file(file_, "not json {").ok());
  set_gemm32_cache_file(file_);
  const auto replaced = gemm32_auto(1);
  ASSERT_TRUE(replaced.ok());
  EXPECT_NE(replaced->origin.find("measured now"), std::string::npos) << replaced->origin;
  EXPECT_TRUE(read()["hosts"].contains(gemm32_host_key(1))) << "the damaged file was replaced";

  ASSERT_TRUE(write_file((dir_ / "plain").string(), "a file, not a directory").ok());
  set_gemm32_cache_file((dir_ / "plain" / "gemm32.json").string());
  const auto unwritable = gemm32_auto(1);
  ASSERT_TRUE(unwritable.ok()) << "a pick without a cache is still a pick";
  EXPECT_NE(unwritable->origin.find("not cached"), std::string::npos) << unwritable->origin;
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::kernels
