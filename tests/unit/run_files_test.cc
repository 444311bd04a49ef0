// What protects a run's files (issue 20 items 6, 7): the JSONL writer on a failing write (a file size
// limit stands in for a full disk: same partial write, then an error) keeps whole lines only and
// names the file; the directory lock refuses a second holder, naming the first, and is free again
// once released; the run directory claim refuses a sealed proof bundle (also from inside it and with
// --overwrite), foreign files, and another run, and clears a run under --overwrite; the stall
// diagnosis names a stopped member of a group from trace files and the process table.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "comm/stall_diagnosis.h"
#include "comm/topology.h"
#include "core/dir_lock.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "core/machine.h"
#include "evidence/run_dir.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp {
namespace {
namespace SP_TEST_ID {
namespace fs = std::filesystem;

TEST(JsonlWriter, AFailedWriteLeavesOnlyWholeLines) {
  const sp::test::TempDir scratch("jsonl");
  const std::string dir = scratch.path();
  fs::create_directories(dir);
  const std::string path = dir + "/x.jsonl";
  auto w = JsonlWriter::open(path, JsonlWriter::Mode::kTruncate);
  ASSERT_TRUE(w.ok());
  const std::string line(100, 'a');
  // Two whole lines fit, the third would cross the limit part-way.
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  struct rlimit lim = old;
  lim.rlim_cur = 250;
  ::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing the process
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
  Status st;
  for (int i = 0; i < 3 && st.ok(); ++i) {
    w->write(nlohmann::json{{"k", line}});
    st = w->flush();
  }
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old), 0);
  ::signal(SIGXFSZ, SIG_DFL);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
  w->write(nlohmann::json{{"k", "later"}});  // dropped: the first error is kept
  EXPECT_FALSE(w->close().ok());
  auto text = read_file(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->size(), 2 * (line.size() + 9));  // {"k":"…"}\n, twice: the third line was cut away whole
  auto doc = parse_jsonl(*text, path, TornTail::kRefuse);
  ASSERT_TRUE(doc.ok()) << doc.status().to_string();
  EXPECT_EQ(doc->records.size(), 2u);
}

TEST(DirectoryLock, OneHolderAtATimeNamedByPid) {
  const sp::test::TempDir scratch("lock");
  const std::string dir = scratch.path();
  fs::create_directories(dir);
  const std::string lock_path = dir + "/.lock";
  auto first = DirectoryLock::acquire(lock_path, dir);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto second = DirectoryLock::acquire(lock_path, dir);  // another open file description: refused
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find(fmt::format("pid {} on host {}", ::getpid(), host_name())),
            std::string::npos)
      << second.status().message();
  EXPECT_NE(second.status().message().find(dir), std::string::npos);
  first->release();
  EXPECT_TRUE(DirectoryLock::acquire(lock_path, dir).ok());
}

TEST(RunDir, Claims) {
  using evidence::claim_run_dir;
  const sp::test::TempDir scratch("claim");
  const std::string root = scratch.path();
  // A new directory is created and locked; a second claim while it is held fails naming the holder.
  {
    auto a = claim_run_dir(root + "/new", {});
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    auto b = claim_run_dir(root + "/new", {});
    ASSERT_FALSE(b.ok());
    EXPECT_NE(b.status().message().find("in use by another process"), std::string::npos) << b.status().message();
  }
  // Another run (no checkpoint): refused, exit 2, untouched; --overwrite clears it (the lock file stays).
  const std::string run = root + "/run";
  fs::create_directories(run + "/trace");
  ASSERT_TRUE(write_file(run + "/contract.json", "{}").ok());
  ASSERT_TRUE(write_file(run + "/trace/rank-00003.jsonl", "{}\n").ok());
  {
    auto r = claim_run_dir(run, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().exit_code(), 2);
    EXPECT_NE(r.status().message().find("holds another run (contract.json, trace/)"), std::string::npos)
        << r.status().message();
    EXPECT_TRUE(fs::exists(run + "/trace/rank-00003.jsonl"));
  }
  {
    auto r = claim_run_dir(run, {.overwrite = true});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_FALSE(fs::exists(run + "/trace"));
    EXPECT_FALSE(fs::exists(run + "/contract.json"));
  }
  // Checkpoints: the resume logic decides. prove's driver files: its contract stage may write there.
  fs::create_directories(run + "/checkpoints/step-000002");
  ASSERT_TRUE(write_file(run + "/checkpoints/LATEST", "x").ok());
  EXPECT_TRUE(claim_run_dir(run, {}).ok());
  const std::string bundle = root + "/bundle";
  fs::create_directories(bundle + "/logs");
  EXPECT_FALSE(claim_run_dir(bundle, {}).ok());
  EXPECT_TRUE(claim_run_dir(bundle, {.contract_only = true}).ok());
  // Foreign files: refused even with --overwrite, and kept.
  ASSERT_TRUE(write_file(bundle + "/notes.txt", "mine").ok());
  auto f = claim_run_dir(bundle, {.overwrite = true});
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("notes.txt"), std::string::npos) << f.status().message();
  EXPECT_TRUE(fs::exists(bundle + "/notes.txt"));
  // A sealed bundle: never, not with --overwrite, not a directory inside it; nothing is created.
  ASSERT_TRUE(write_file(bundle + "/bundle.sha256", "").ok());
  fs::remove(bundle + "/notes.txt");
  const auto lock_written = fs::last_write_time(bundle + "/.shardproof.lock");
  for (const std::string& d : {bundle, bundle + "/parallel", bundle + "/parallel/deeper"}) {
    auto s = claim_run_dir(d, {.overwrite = true});
    ASSERT_FALSE(s.ok()) << d;
    EXPECT_NE(s.status().message().find("sealed proof bundle"), std::string::npos) << s.status().message();
  }
  EXPECT_FALSE(fs::exists(bundle + "/parallel"));
  EXPECT_EQ(fs::last_write_time(bundle + "/.shardproof.lock"), lock_written);  // not even locked
}

TEST(StallDiagnosis, NamesTheStoppedMember) {
  const sp::test::TempDir scratch("stall");
  const std::string dir = scratch.path();
  fs::create_directories(dir + "/trace");
  // World ranks 0, 1, 2 in group 'world'. Rank 0 (this test) and rank 2 wait in seq 6 (their timed_out
  // records); rank 1's trace ends at seq 5 and its process is stopped.
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    std::_Exit(0);
  }
  ASSERT_GT(child, 0);
  ASSERT_EQ(::kill(child, SIGSTOP), 0);
  for (int i = 0; i < 100 && comm::process_state(child) != 'T'; ++i) ::usleep(10000);
  EXPECT_EQ(comm::process_state(child), 'T');
  auto rec = [](int64_t seq, bool timed_out) {
    return fmt::format("{{\"group\":\"world\",\"seq\":{},\"step\":3,\"phase\":\"grad_sync\"{}}}\n", seq,
                       timed_out ? ",\"timed_out\":true" : "");
  };
  ASSERT_TRUE(write_file(comm::trace_file_path(dir, 0), rec(5, false) + rec(6, true)).ok());
  ASSERT_TRUE(write_file(comm::trace_file_path(dir, 1), rec(4, false) + rec(5, false)).ok());
  ASSERT_TRUE(write_file(comm::trace_file_path(dir, 2), rec(5, false) + rec(6, true)).ok());
  const nlohmann::json topo = {{"ranks",
                                {{{"world_rank", 0}, {"host", host_name()}, {"pid", ::getpid()}},
                                 {{"world_rank", 1}, {"host", host_name()}, {"pid", child}},
                                 {{"world_rank", 2}, {"host", host_name()}, {"pid", ::getpid()}}}}};
  ASSERT_TRUE(write_file(dir + "/" + std::string(comm::kTopologyFileName), topo.dump()).ok());
  comm::TraceRecord pending;
  pending.group = "world";
  pending.seq = 6;
  const int members[] = {0, 1, 2};
  const std::string report = comm::diagnose_stall(dir, pending, members, 0, 5.0);
  EXPECT_NE(report.find("world rank 1 never reached seq 6 of group 'world', where world ranks 0, 2 waited"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find(fmt::format("its process {} on this host is stopped (state T", child)), std::string::npos)
      << report;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  // Without rank 2's trace (another host, no shared file system): said, with what to run.
  fs::remove(comm::trace_file_path(dir, 2));
  const std::string partial = comm::diagnose_stall(dir, pending, members, 0, 0.2);
  EXPECT_NE(partial.find("not readable here"), std::string::npos) << partial;
  EXPECT_NE(partial.find("shardproof trace check"), std::string::npos) << partial;
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp
