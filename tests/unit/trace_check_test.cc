// The trace pipeline without MPI: TracedCommunicator + TraceWriter write real trace files for n
// simulated ranks (each over a FakeCommunicator that moves no data), then the checker, the CLI
// (`shardproof trace check|chrome`) and the Chrome exporter read them back. Each desync case is a
// one-line change to one rank's script, and the test asserts the exact group, seq, ranks and field
// the checker names. Also: record round trip, parser robustness, the watchdog's report.
#include "evidence/trace_check.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "cli/command.h"
#include "cli_run.h"
#include "comm/topology.h"
#include "comm/trace_writer.h"
#include "comm/traced_communicator.h"
#include "comm/watchdog.h"
#include "core/file_io.h"
#include "evidence/trace_chrome.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::cli {
void register_trace(CLI::App& app, CommandResult& result);  // cmd_trace.cc (command.h lists it once merged)
}

namespace sp::evidence {
namespace {
namespace SP_TEST_ID {
using comm::Communicator;
using comm::OpKind;
using comm::Phase;
using comm::ReduceOp;
using comm::TraceContext;
using comm::TraceRecord;
namespace fs = std::filesystem;

// A group member that moves no data: outputs are zero-filled so digests are deterministic.
class FakeComm final : public Communicator {
 public:
  FakeComm(std::string name, int rank, std::vector<int> members)
      : name_(std::move(name)), rank_(rank), members_(std::move(members)) {}
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  const std::string& name() const override { return name_; }
  std::span<const int> world_ranks() const override { return members_; }
  void all_reduce(void*, int64_t, DType, ReduceOp) override {
    ++calls;
    if (hook) hook();
  }
  void reduce_scatter(const void*, void* recv, std::span<const int64_t> c, DType t, ReduceOp) override {
    zero(recv, c[static_cast<size_t>(rank_)], t);
  }
  void all_gather(const void*, void* recv, std::span<const int64_t> c, DType t) override { zero(recv, sum(c), t); }
  void all_to_all(const void*, std::span<const int64_t>, void* recv, std::span<const int64_t> rc, DType t) override {
    zero(recv, sum(rc), t);
  }
  void broadcast(void*, int64_t, DType, int) override { ++calls; }
  void gather(const void*, int64_t, void* recv, std::span<const int64_t> c, DType t, int root) override {
    if (rank_ == root)
      zero(recv, sum(c), t);
    else
      ++calls;
  }
  void send(const void*, int64_t, DType, int, int) override { ++calls; }
  void recv(void* data, int64_t count, DType t, int, int) override { zero(data, count, t); }
  std::unique_ptr<comm::Request> isend(const void*, int64_t, DType, int, int) override {
    ++calls;
    return std::make_unique<Done>();
  }
  std::unique_ptr<comm::Request> irecv(void* data, int64_t count, DType t, int, int) override {
    zero(data, count, t);
    return std::make_unique<Done>();
  }
  void barrier() override { ++calls; }
  int calls = 0;
  std::function<void()> hook;  // runs inside all_reduce (a test can block there)

 private:
  struct Done final : comm::Request {
    void wait() override {}
  };
  static int64_t sum(std::span<const int64_t> c) { return std::accumulate(c.begin(), c.end(), int64_t{0}); }
  void zero(void* p, int64_t n, DType t) {
    ++calls;
    if (n > 0) std::memset(p, 0, static_cast<size_t>(n) * dtype_size(t));
  }
  std::string name_;
  int rank_;
  std::vector<int> members_;
};

using sp::test::TempDir;

std::unique_ptr<comm::TracedCommunicator> traced(const std::string& name, int rank, std::vector<int> members,
                                                 const TraceContext& ctx, comm::TraceWriter* writer) {
  return std::make_unique<comm::TracedCommunicator>(std::make_unique<FakeComm>(name, rank, std::move(members)), ctx,
                                                    writer, nullptr);
}

std::vector<int> iota(int n) {
  std::vector<int> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// The reference script: every op kind once on the world group, over two steps.
// `fault` changes what rank `deviant` does; "" = everyone behaves.
void script(int r, int n, Communicator& world, TraceContext& ctx, const std::string& fault, int deviant) {
  const bool odd = r == deviant;
  std::vector<float> buf(256, 0.0f), out(256, 0.0f);
  std::vector<double> dbuf(16, 0.0);
  ctx.set(Phase::kForward, 0);
  auto first_two = [&] {
    world.all_reduce(buf.data(), odd && fault == "count" ? 11 : 10, odd && fault == "dtype" ? DType::kI32 : DType::kF32,
                     ReduceOp::kSum);
  };
  auto bcast = [&] { world.broadcast(buf.data(), 4, DType::kF32, odd && fault == "root" ? 2 : 1); };
  if (odd && fault == "reorder") {
    bcast();
    first_two();
  } else {
    first_two();
    bcast();
  }
  const std::vector<int64_t> even(static_cast<size_t>(n), 2), ramp = [&] {
    std::vector<int64_t> v;
    for (int q = 0; q < n; ++q) v.push_back(q + 1);
    return v;
  }();
  world.reduce_scatter(buf.data(), out.data(), even, DType::kF32, ReduceOp::kSum);
  world.all_gather(buf.data(), out.data(), ramp, DType::kF32);
  std::vector<int64_t> sc, rc;  // rank a sends a+b to rank b; b expects a+b from a
  for (int q = 0; q < n; ++q) {
    sc.push_back(r + q);
    rc.push_back(q + r + (odd && fault == "alltoall" && q == 0 ? 1 : 0));
  }
  world.all_to_all(buf.data(), sc, out.data(), rc, DType::kF32);
  world.gather(buf.data(), 1, r == 0 ? out.data() : nullptr, std::vector<int64_t>(static_cast<size_t>(n), 1),
               DType::kF32, 0);
  world.barrier();
  ctx.set(Phase::kBackward, 0, 3);
  world.send(buf.data(), odd && fault == "p2p_count" ? 6 : 5, DType::kF32, (r + 1) % n, 7);
  world.recv(out.data(), 5, DType::kF32, (r + n - 1) % n, 7);
  if (!(odd && fault == "p2p_missing")) {
    auto s = world.isend(buf.data(), 3, DType::kF32, (r + 1) % n, 8);
    auto q = world.irecv(out.data(), 3, DType::kF32, (r + n - 1) % n, 8);
    q->wait();
    s->wait();
  }
  ctx.set(Phase::kGradSync, 1);
  if (!(odd && fault == "skip_last")) world.all_reduce(dbuf.data(), 3, DType::kF64, ReduceOp::kMax);
  if (odd && fault == "step") ctx.set(Phase::kGradSync, 2);
  world.all_reduce(dbuf.data(), 2, DType::kF64, ReduceOp::kSum);
  if (odd && fault == "extra") world.all_reduce(dbuf.data(), 2, DType::kF64, ReduceOp::kSum);
}

void write_topology_file(const std::string& dir, const comm::ProcessGrid& g) {
  std::vector<comm::RankInfo> ranks;
  for (int r = 0; r < g.world_size(); ++r)
    ranks.push_back({.world_rank = r, .coords = g.coords_of(r), .host = "h", .pid = r + 1});
  ASSERT_TRUE(write_file(dir + "/topology.json", comm::topology_json(g, ranks).dump(2)).ok());
}

// Writes the traces of n ranks running `script` with `fault` on rank `deviant`, plus topology.json.
void simulate(const std::string& dir, int n, const std::string& fault = "", int deviant = -1) {
  write_topology_file(dir, *comm::ProcessGrid::create(n, 1, 1, "tp-dp-pp", n));
  for (int r = 0; r < n; ++r) {
    auto writer = comm::TraceWriter::open(dir, r);
    ASSERT_TRUE(writer.ok()) << writer.status().to_string();
    TraceContext ctx;
    auto world = traced("world", r, iota(n), ctx, writer->get());
    script(r, n, *world, ctx, fault, deviant);
    ASSERT_TRUE((*writer)->status().ok());
  }
}

TraceReport check_or_die(const std::string& dir) {
  Result<TraceReport> report = check_trace_dir(dir);
  EXPECT_TRUE(report.ok()) << report.status().to_string();
  return report.ok() ? *report : TraceReport{};
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines, const std::string& tail = "") {
  std::string text;
  for (const std::string& l : lines) text += l + "\n";
  ASSERT_TRUE(write_file(path, text + tail).ok());
}

TEST(TraceCheck, ConsistentRunPassesAndSumsTraffic) {
  TempDir dir;
  simulate(dir.path(), 4);
  const TraceReport report = check_or_die(dir.path());
  EXPECT_TRUE(report.consistent()) << report.summary();
  EXPECT_TRUE(report.topology_found);
  EXPECT_EQ(report.world_size, 4);
  EXPECT_EQ(report.rank_files, 4);
  EXPECT_EQ(report.records, 4 * 13);
  EXPECT_TRUE(report.warnings.empty());
  // all_reduce of 10 F32 at step 0 forward: 40 bytes per rank, wire 2·3/4·40 = 60 per rank.
  // Plus broadcast 16 B (wire 12), reduce_scatter Σ8 F32 = 32 B (wire 24), all_gather Σ(1..4) = 40 B
  // (wire 30), all_to_all rank r sends Σ_q (r+q) = 4r+6 elements, gather Σ4 = 16 B (wire 12).
  const Traffic fwd = report.traffic.at(TrafficKey{"world", 0, Phase::kForward});
  EXPECT_EQ(fwd.ops, 4 * 7);
  const int64_t a2a_bytes = 4 * (6 + 10 + 14 + 18);  // Σ_r (4r+6) elements × 4 bytes
  EXPECT_EQ(fwd.bytes, 4 * (40 + 16 + 32 + 40 + 16) + a2a_bytes);
  EXPECT_EQ(fwd.wire_bytes, 4 * (60 + 12 + 24 + 30 + 12) + (18 + 30 + 42 + 54));  // a2a: ⌊3·b/4⌋ per rank
  const Traffic bwd = report.traffic.at(TrafficKey{"world", 0, Phase::kBackward});
  EXPECT_EQ(bwd.ops, 4 * 4);
  EXPECT_EQ(bwd.bytes, 4 * (20 + 20 + 12 + 12));
  EXPECT_EQ(bwd.wire_bytes, bwd.bytes);
  const Traffic sync = report.traffic.at(TrafficKey{"world", 1, Phase::kGradSync});
  EXPECT_EQ(sync.bytes, 4 * (24 + 16));
  EXPECT_EQ(report.group_traffic.at("world").ops, 4 * 13);
  EXPECT_NE(report.summary().find("consistent"), std::string::npos);
  EXPECT_TRUE(report.to_json()["consistent"].get<bool>());
}

struct DesyncCase {
  std::string fault;
  int deviant;
  std::string kind;
  int64_t seq;
  std::vector<int> ranks;
  std::string field;
  std::string expected;  // substring of TraceMismatch::expected
  std::string actual;    // substring of TraceMismatch::actual
};

class TraceDesync : public ::testing::TestWithParam<DesyncCase> {};

TEST_P(TraceDesync, NamesGroupSeqRanksAndField) {
  const DesyncCase& c = GetParam();
  TempDir dir;
  simulate(dir.path(), 4, c.fault, c.deviant);
  const TraceReport report = check_or_die(dir.path());
  ASSERT_FALSE(report.consistent()) << c.fault;
  const TraceMismatch& m = report.mismatches.front();
  EXPECT_EQ(m.kind, c.kind) << m.message;
  EXPECT_EQ(m.group, "world") << m.message;
  EXPECT_EQ(m.seq, c.seq) << m.message;
  EXPECT_EQ(m.ranks, c.ranks) << m.message;
  EXPECT_EQ(m.field, c.field) << m.message;
  EXPECT_NE(m.expected.find(c.expected), std::string::npos) << m.expected;
  EXPECT_NE(m.actual.find(c.actual), std::string::npos) << m.actual;
  EXPECT_NE(m.message.find("world"), std::string::npos);
  EXPECT_NE(report.summary().find("INCONSISTENT"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TraceDesync,
    ::testing::Values(
        DesyncCase{"count", 2, "field", 0, {2}, "count", "10 on ranks 0, 1, 3", "11 on rank 2"},
        DesyncCase{"dtype", 1, "field", 0, {1}, "dtype", "F32 on ranks 0, 2, 3", "I32 on rank 1"},
        DesyncCase{"root", 3, "field", 1, {3}, "root", "1 on ranks 0, 1, 2", "2 on rank 3"},
        DesyncCase{"reorder", 0, "field", 0, {0}, "op", "all_reduce on ranks 1, 2, 3", "broadcast on rank 0"},
        // A missing op in the middle shifts the sequence: the next op's fields differ.
        DesyncCase{"skip_last", 2, "field", 11, {2}, "reduce", "max on ranks 0, 1, 3", "sum on rank 2"},
        DesyncCase{"extra", 1, "missing_op", 13, {1}, "op", "(none) on ranks 0, 2, 3", "all_reduce on rank 1"},
        DesyncCase{"step", 3, "field", 12, {3}, "step", "1 on ranks 0, 1, 2", "2 on rank 3"},
        DesyncCase{"alltoall", 2, "field", 4, {0, 2}, "counts/recv_counts", "2", "3"},
        DesyncCase{"p2p_count", 1, "p2p_field", 7, {1, 2}, "count", "6", "5"}),
    [](const ::testing::TestParamInfo<DesyncCase>& info) { return info.param.fault; });

TEST(TraceCheck, UnmatchedPointToPointNamesBothEnds) {
  TempDir dir;
  simulate(dir.path(), 4, "p2p_missing", 3);  // rank 3 skips its isend to 0 and its irecv from 2
  const TraceReport report = check_or_die(dir.path());
  ASSERT_EQ(report.mismatches.size(), 2u) << report.summary();
  std::set<std::vector<int>> pairs;
  for (const TraceMismatch& m : report.mismatches) {
    EXPECT_EQ(m.kind, "p2p_unmatched");
    EXPECT_NE(m.message.find("tag 8"), std::string::npos) << m.message;
    pairs.insert(m.ranks);
  }
  EXPECT_EQ(pairs, (std::set<std::vector<int>>{{2, 3}, {3, 0}}));  // {sender, receiver}
}

// Issue 31 (desync-extra-collective on pp): the deviant rank's extra all_reduce fails and the job is stopped
// mid-step; the other ranks are killed with nonblocking sends in flight, which are never recorded. Those
// missing records are the stop's consequence, not the desync: the checker names the deviant rank alone, and
// the same gaps in a job that was not stopped stay mismatches.
TEST(TraceCheck, OpsInFlightWhenAStoppedJobKilledItsRanksAreNotTheDesync) {
  TempDir dir;
  simulate(dir.path(), 4, "extra", 2);
  for (int r = 0; r < 4; ++r) {
    std::vector<std::string> kept;
    const std::vector<std::string> lines = read_lines(comm::trace_file_path(dir.path(), r));
    for (const std::string& line : lines) {
      nlohmann::json j = nlohmann::json::parse(line);
      // Ranks 0, 1, 3 are killed in step 0's backward: nothing after it; rank 1's isend (tag 8) was in flight.
      // Rank 2 did not complete step 1's all-reduces either (they need every rank): only its extra one is kept.
      if (j["step"].get<int64_t>() > 0 && !(r == 2 && &line == &lines.back())) continue;
      if (r == 1 && j["op"] == "isend") continue;
      kept.push_back(line);
    }
    if (r == 2) {  // rank 2 failed inside its extra all_reduce (after its step-0 records)
      nlohmann::json extra = nlohmann::json::parse(kept.back());
      kept.pop_back();
      extra["aborted"] = true;
      extra["step"] = 0;
      extra["seq"] = static_cast<int64_t>(kept.size());  // right after its step-0 records
      extra.erase("out_digest");
      kept.push_back(extra.dump());
    }
    write_lines(comm::trace_file_path(dir.path(), r), kept);
  }
  TraceReport report = check_or_die(dir.path());
  ASSERT_FALSE(report.consistent());
  for (const TraceMismatch& m : report.mismatches) {
    EXPECT_EQ(m.ranks, std::vector<int>{2}) << m.message;
    EXPECT_NE(m.kind, "p2p_unmatched") << m.message;
    EXPECT_NE(m.kind, "seq_gap") << m.message;
  }
  size_t in_flight = 0;
  for (const std::string& w : report.warnings) in_flight += w.find("stopped job killed") != std::string::npos;
  EXPECT_EQ(in_flight, 2u) << report.summary();  // rank 1's seq gap; rank 2's irecv without rank 1's isend
  // Negative twin: the same missing isend in a job that was not stopped is a mismatch naming ranks 1 and 2.
  std::vector<std::string> lines = read_lines(comm::trace_file_path(dir.path(), 2));
  lines.pop_back();
  write_lines(comm::trace_file_path(dir.path(), 2), lines);
  report = check_or_die(dir.path());
  bool gap = false, unmatched = false;
  for (const TraceMismatch& m : report.mismatches) {
    gap = gap || (m.kind == "seq_gap" && m.ranks == std::vector<int>{1});
    unmatched = unmatched || (m.kind == "p2p_unmatched" && m.ranks == std::vector<int>{1, 2});
  }
  EXPECT_TRUE(gap && unmatched) << report.summary();
}

TEST(TraceCheck, MissingOpAtTheEndNamesTheShortRank) {
  TempDir dir;
  simulate(dir.path(), 4);
  // Drop rank 2's last record (the step-1 all_reduce of 2 F64).
  const std::string path = comm::trace_file_path(dir.path(), 2);
  std::vector<std::string> lines = read_lines(path);
  lines.pop_back();
  write_lines(path, lines);
  const TraceReport report = check_or_die(dir.path());
  ASSERT_FALSE(report.consistent());
  const TraceMismatch& m = report.mismatches.front();
  EXPECT_EQ(m.kind, "missing_op");
  EXPECT_EQ(m.seq, 12);
  EXPECT_EQ(m.ranks, std::vector<int>{2});
  EXPECT_EQ(m.actual, "(none) on rank 2");
  EXPECT_NE(m.message.find("rank 2 issued 8 collectives"), std::string::npos) << m.message;
}

TEST(TraceCheck, TornLastLineIsToleratedAndReported) {
  TempDir dir;
  simulate(dir.path(), 2);
  // A crash while writing a record nobody completed: the fragment is ignored, the run is consistent.
  const std::string path = comm::trace_file_path(dir.path(), 1);
  write_lines(path, read_lines(path), R"({"group":"world","group_size":2,"seq":13,"op":"all_re)");
  TraceReport report = check_or_die(dir.path());
  EXPECT_TRUE(report.consistent()) << report.summary();
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_NE(report.warnings[0].find("torn last line"), std::string::npos);
  EXPECT_NE(report.warnings[0].find("rank-00001.jsonl"), std::string::npos);
  // A torn record that the other rank did complete: its op is missing on the torn rank.
  std::vector<std::string> lines = read_lines(path);
  lines.pop_back();  // the fragment
  const std::string last = lines.back();
  lines.pop_back();
  write_lines(path, lines, last.substr(0, last.size() / 2));
  report = check_or_die(dir.path());
  ASSERT_FALSE(report.consistent());
  EXPECT_EQ(report.mismatches.front().kind, "missing_op");
  EXPECT_EQ(report.mismatches.front().ranks, (std::vector<int>{0, 1}));  // two ranks: a tie, both named
  EXPECT_EQ(report.warnings.size(), 1u);
}

TEST(TraceCheck, MissingRankFileComesFirst) {
  TempDir dir;
  simulate(dir.path(), 4);
  fs::remove(comm::trace_file_path(dir.path(), 2));
  const TraceReport report = check_or_die(dir.path());
  ASSERT_FALSE(report.consistent());
  EXPECT_EQ(report.mismatches.front().kind, "missing_rank_file");
  EXPECT_EQ(report.mismatches.front().ranks, std::vector<int>{2});
  EXPECT_NE(report.mismatches.front().message.find("rank-00002.jsonl"), std::string::npos);
  // The other ranks agree with each other, and messages to or from rank 2 are not blamed on them.
  EXPECT_EQ(report.mismatches.size(), 1u) << report.summary();
}

TEST(TraceCheck, CorruptLineSeqGapAndTimedOut) {
  TempDir dir;
  simulate(dir.path(), 2);
  const std::string p0 = comm::trace_file_path(dir.path(), 0), p1 = comm::trace_file_path(dir.path(), 1);
  const std::vector<std::string> good0 = read_lines(p0);

  std::vector<std::string> lines = good0;
  lines[1] = "not json";
  write_lines(p0, lines);
  TraceReport report = check_or_die(dir.path());
  ASSERT_FALSE(report.consistent());
  EXPECT_EQ(report.mismatches.front().kind, "corrupt_record");
  EXPECT_NE(report.mismatches.front().message.find("rank-00000.jsonl:2"), std::string::npos)
      << report.mismatches.front().message;

  lines = good0;
  lines[2] = lines[2].substr(0, lines[2].find("\"count\"")) + R"("count":"x"})";
  write_lines(p0, lines);
  report = check_or_die(dir.path());
  ASSERT_FALSE(report.consistent());
  EXPECT_NE(report.mismatches.front().message.find("rank-00000.jsonl:3: field 'count' is not an integer"),
            std::string::npos)
      << report.mismatches.front().message;

  lines = good0;
  lines.erase(lines.begin() + 3);
  write_lines(p0, lines);
  report = check_or_die(dir.path());
  ASSERT_FALSE(report.consistent());
  bool gap = false;
  for (const TraceMismatch& m : report.mismatches)
    gap = gap || (m.kind == "seq_gap" && m.ranks == std::vector<int>{0} && m.seq == 4);
  EXPECT_TRUE(gap) << report.summary();

  // The watchdog's record: rank 1 waited in an all_reduce that rank 0 never issued.
  write_lines(p0, good0);
  nlohmann::json stuck = nlohmann::json::parse(read_lines(p1).back());
  stuck["seq"] = 13;
  stuck["timed_out"] = true;
  stuck["t_end_us"] = 0;
  stuck.erase("out_digest");
  std::vector<std::string> l1 = read_lines(p1);
  l1.push_back(stuck.dump());
  write_lines(p1, l1);
  report = check_or_die(dir.path());
  ASSERT_FALSE(report.consistent());
  EXPECT_EQ(report.mismatches[0].kind, "missing_op");
  EXPECT_EQ(report.mismatches[0].seq, 13);
  EXPECT_EQ(report.mismatches[1].kind, "timed_out");
  EXPECT_EQ(report.mismatches[1].ranks, std::vector<int>{1});
  EXPECT_NE(report.mismatches[1].message.find("watchdog stopped rank 1 waiting in all_reduce (seq 13"),
            std::string::npos)
      << report.mismatches[1].message;
}

TEST(TraceCheck, GridGroupsMatchTheTopology) {
  TempDir dir;
  const comm::ProcessGrid g = *comm::ProcessGrid::create(2, 2, 1, "tp-dp-pp", 4);
  write_topology_file(dir.path(), g);
  for (bool wrong : {false, true}) {
    for (int r = 0; r < 4; ++r) {
      auto writer = comm::TraceWriter::open(dir.path(), r);
      ASSERT_TRUE(writer.ok());
      TraceContext ctx;
      auto dp = traced(g.group_name(comm::Axis::kDp, r), g.coords_of(r).dp, g.group_of(comm::Axis::kDp, r), ctx,
                       writer->get());
      // The faulty variant: rank 3 claims to be in rank 0's tp group.
      const int tp_of = wrong && r == 3 ? 0 : r;
      auto tp = traced(g.group_name(comm::Axis::kTp, tp_of), g.coords_of(r).tp, g.group_of(comm::Axis::kTp, tp_of), ctx,
                       writer->get());
      float x[4] = {};
      ctx.set(Phase::kGradSync, 0);
      dp->all_reduce(x, 4, DType::kF32, ReduceOp::kSum);
      ctx.set(Phase::kForward, 0, 0);
      tp->all_reduce(x, 2, DType::kF32, ReduceOp::kSum);
    }
    const TraceReport report = check_or_die(dir.path());
    if (!wrong) {
      EXPECT_TRUE(report.consistent()) << report.summary();
      EXPECT_EQ(report.group_traffic.size(), 4u);  // dp[tp0.pp0], dp[tp1.pp0], tp[dp0.pp0], tp[dp1.pp0]
      EXPECT_EQ(report.traffic.at(TrafficKey{"dp[tp1.pp0]", 0, Phase::kGradSync}).bytes, 2 * 16);
    } else {
      ASSERT_FALSE(report.consistent());
      EXPECT_EQ(report.mismatches.front().kind, "members") << report.summary();
      EXPECT_NE(report.summary().find("rank 3 traced group 'tp[dp0.pp0]'"), std::string::npos) << report.summary();
    }
  }
}

TEST(TraceCheck, UsageErrorsAndCli) {
  TempDir dir;
  Result<TraceReport> missing = check_trace_dir(dir.path() + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().exit_code(), 2);
  EXPECT_FALSE(check_trace_dir(dir.path()).ok());  // no trace/

  auto run_cli = [](const std::vector<std::string>& args) {
    std::string line;
    for (const std::string& a : args) line += (line.empty() ? "" : " ") + a;
    return sp::test::run_command(cli::register_trace, line);
  };
  EXPECT_EQ(run_cli({"trace", "check", dir.path() + "/nope"}), 2);
  EXPECT_EQ(run_cli({"trace", "check"}), 2);
  simulate(dir.path(), 2);
  const std::string json_out = dir.path() + "/report.json";
  EXPECT_EQ(run_cli({"trace", "check", dir.path(), "--json", json_out}), 0);
  const nlohmann::json j = nlohmann::json::parse(*read_file(json_out));
  EXPECT_TRUE(j["consistent"].get<bool>());
  EXPECT_FALSE(j["traffic"].empty());
  simulate(dir.path(), 2, "count", 1);
  EXPECT_EQ(run_cli({"trace", "check", dir.path()}), 1);

  const std::string chrome_out = dir.path() + "/chrome.json";
  EXPECT_EQ(run_cli({"trace", "chrome", dir.path()}), 2);  // --out is required
  EXPECT_EQ(run_cli({"trace", "chrome", dir.path(), "--out", chrome_out}), 0);
  EXPECT_TRUE(path_exists(chrome_out));
}

TEST(TraceChrome, OneProcessPerRankOneTrackPerGroup) {
  TempDir dir;
  simulate(dir.path(), 3);
  const Result<nlohmann::json> trace = chrome_trace(dir.path());
  ASSERT_TRUE(trace.ok()) << trace.status().to_string();
  int complete = 0;
  std::set<int> pids;
  std::map<int, std::string> process_names;
  for (const nlohmann::json& e : (*trace)["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      pids.insert(e["pid"].get<int>());
      EXPECT_EQ(e["tid"], 1);  // "world" is the first track
      EXPECT_GE(e["ts"].get<int64_t>(), 0);
      EXPECT_GE(e["dur"].get<int64_t>(), 0);
      EXPECT_TRUE(e["args"].contains("seq"));
      EXPECT_TRUE(e["args"].contains("bytes"));
      EXPECT_TRUE(e["args"].contains("phase"));
      EXPECT_TRUE(e["args"].contains("step"));
      EXPECT_TRUE(e["args"].contains("micro_batch"));
    } else if (e["name"] == "process_name") {
      process_names[e["pid"].get<int>()] = e["args"]["name"].get<std::string>();
    } else if (e["name"] == "thread_name") {
      EXPECT_EQ(e["args"]["name"], "world");
    }
  }
  EXPECT_EQ(complete, 3 * 13);
  EXPECT_EQ(pids, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(process_names[2], "rank 2 (dp2.tp0.pp0)");
  EXPECT_FALSE(chrome_trace(dir.path() + "/nope").ok());
}

TEST(TraceRecordFormat, RoundTripAndFieldErrors) {
  TraceRecord r;
  r.group = "dp[tp0.pp1]";
  r.group_size = 4;
  r.group_rank = 2;
  r.members = {1, 3, 5, 7};
  r.seq = 9;
  r.op = OpKind::kReduceScatter;
  r.dtype = DType::kF32;
  r.counts = {3, 3, 2, 2};
  r.count = 10;
  r.bytes = 40;
  r.wire_bytes = comm::wire_bytes_of(r.op, r.bytes, r.group_size);
  r.reduce = ReduceOp::kSum;
  r.phase = Phase::kGradSync;
  r.step = 5;
  r.t_start_us = 100;
  r.t_end_us = 150;
  r.in_digest = xxh3_128("abc", 3);
  const std::string line = comm::trace_record_to_json(r);
  const Result<TraceRecord> back = comm::trace_record_from_json(nlohmann::json::parse(line));
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(comm::trace_record_to_json(*back), line);
  EXPECT_EQ(back->wire_bytes, 30);
  EXPECT_FALSE(back->out_digest.has_value());

  // Closed forms of the ideal traffic (docs/formats/trace.md), rounded down.
  EXPECT_EQ(comm::wire_bytes_of(OpKind::kAllReduce, 100, 3), 133);
  EXPECT_EQ(comm::wire_bytes_of(OpKind::kAllGather, 100, 3), 66);
  EXPECT_EQ(comm::wire_bytes_of(OpKind::kAllReduce, 100, 1), 0);
  EXPECT_EQ(comm::wire_bytes_of(OpKind::kSend, 100, 8), 100);
  EXPECT_EQ(comm::wire_bytes_of(OpKind::kBarrier, 0, 8), 0);

  const nlohmann::json good = nlohmann::json::parse(line);
  const std::vector<std::pair<std::function<void(nlohmann::json&)>, std::string>> bad = {
      {[](nlohmann::json& j) { j.erase("seq"); }, "field 'seq' is missing"},
      {[](nlohmann::json& j) { j["seq"] = -1; }, "field 'seq' = -1 is outside"},
      {[](nlohmann::json& j) { j["op"] = "all_reduce_v"; }, "field 'op' = 'all_reduce_v'"},
      {[](nlohmann::json& j) { j["dtype"] = "F128"; }, "field 'dtype' = 'F128'"},
      {[](nlohmann::json& j) { j["reduce"] = "prod"; }, "field 'reduce' = 'prod'"},
      {[](nlohmann::json& j) { j["phase"] = "lunch"; }, "field 'phase' = 'lunch'"},
      {[](nlohmann::json& j) { j["group_rank"] = 4; }, "field 'group_rank' = 4 is outside [0, 3]"},
      {[](nlohmann::json& j) {
         j["counts"] = {1, 2};
       },
       "field 'counts' has 2 entries"},
      {[](nlohmann::json& j) {
         j["counts"] = {3, 3, 2, 3};
       },
       "count 10 ≠ Σcounts = 11"},
      {[](nlohmann::json& j) { j["bytes"] = 41; }, "bytes 41 ≠ count 10 × 4"},
      {[](nlohmann::json& j) { j["in_digest"] = "xyz"; }, "field 'in_digest'"},
      {[](nlohmann::json& j) {
         j["members"] = {1, 2, 3};
       },
       "field 'members' has 3 entries"},
      {[](nlohmann::json& j) { j["t_end_us"] = 1; }, "t_end_us 1 is before t_start_us 100"},
      {[](nlohmann::json& j) { j["group"] = ""; }, "field 'group' is empty"},
      {[](nlohmann::json& j) { j["count"] = 18446744073709551615ull; },
       "field 'count' = 18446744073709551615 is out of range"},
      {[](nlohmann::json& j) { j = nlohmann::json::array(); }, "not a JSON object"},
  };
  for (const auto& [mutate, expect] : bad) {
    nlohmann::json j = good;
    mutate(j);
    const Result<TraceRecord> r2 = comm::trace_record_from_json(j);
    ASSERT_FALSE(r2.ok()) << expect;
    EXPECT_NE(r2.status().message().find(expect), std::string::npos) << r2.status().message();
  }
  EXPECT_EQ(comm::trace_file_rank("rank-00042.jsonl"), 42);
  EXPECT_EQ(comm::trace_file_rank("rank-123456.jsonl"), 123456);
  for (const char* name :
       {"rank-42.jsonl", "rank-0004x.jsonl", "rank-00042.json", "Rank-00042.jsonl", "rank--0042.jsonl"})
    EXPECT_FALSE(comm::trace_file_rank(name).has_value()) << name;
}

TEST(TraceRecordFormat, MutatedFilesNeverCrashTheParser) {
  TempDir dir;
  simulate(dir.path(), 2);
  const std::string text = *read_file(comm::trace_file_path(dir.path(), 0));
  const std::string path = "fuzz.jsonl";
  std::mt19937_64 rng(1234);
  for (int trial = 0; trial < 400; ++trial) {
    std::string mutated = text;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = rng() % mutated.size();
      switch (rng() % 3) {
        case 0:
          mutated[at] = static_cast<char>(rng() % 256);
          break;
        case 1:
          mutated = mutated.substr(0, at) + mutated.substr(std::min(mutated.size(), at + 1 + rng() % 8));
          break;
        default: {
          const std::string piece(1 + rng() % 4, "{}[]\",:0-9e"[rng() % 12]);
          mutated = mutated.substr(0, at) + piece + mutated.substr(at);
          break;
        }
      }
      if (mutated.empty()) mutated.push_back('x');
    }
    const Result<RankTrace> rt = parse_rank_trace(mutated, 0, path);
    if (!rt.ok()) {
      EXPECT_NE(rt.status().message().find("fuzz.jsonl:"), std::string::npos);
    }
    // Whatever parsed must also be checkable without crashing.
    if (rt.ok()) (void)check_traces({*rt}, 1, nullptr).summary();
  }
}

TEST(TracedCommunicator, WithoutWriterForwardsAndWritesNothing) {
  TraceContext ctx;
  auto inner = std::make_unique<FakeComm>("world", 0, std::vector<int>{0, 1});
  FakeComm* fake = inner.get();
  comm::TracedCommunicator c(std::move(inner), ctx, nullptr, nullptr);
  float x[2] = {};
  c.all_reduce(x, 2, DType::kF32, ReduceOp::kSum);
  c.barrier();
  c.isend(x, 2, DType::kF32, 1, 0)->wait();
  EXPECT_EQ(fake->calls, 3);
  EXPECT_EQ(c.ops_issued(), 3);
  EXPECT_FALSE(c.tracing());
}

TEST(TracedCommunicator, ScopedPhaseStampsAndRestoresContext) {
  TempDir dir;
  auto writer = comm::TraceWriter::open(dir.path(), 7);
  ASSERT_TRUE(writer.ok());
  TraceContext ctx;
  auto c = traced("tp[dp0.pp0]", 1, {6, 7}, ctx, writer->get());
  float x[3] = {1, 2, 3};
  {
    comm::ScopedPhase outer(ctx, Phase::kBackward, 4, 2);
    c->all_reduce(x, 3, DType::kF32, ReduceOp::kMax);
    {
      comm::ScopedPhase inner(ctx, Phase::kCheckpoint, 4);
      c->barrier();
    }
    c->broadcast(x, 3, DType::kF32, 0);
  }
  c->barrier();
  const std::vector<std::string> lines = read_lines(comm::trace_file_path(dir.path(), 7));
  ASSERT_EQ(lines.size(), 4u);
  std::vector<TraceRecord> r;
  for (const std::string& l : lines) r.push_back(*comm::trace_record_from_json(nlohmann::json::parse(l)));
  EXPECT_EQ(r[0].members, (std::vector<int>{6, 7}));
  EXPECT_TRUE(r[1].members.empty());
  EXPECT_EQ(r[0].phase, Phase::kBackward);
  EXPECT_EQ(r[0].micro_batch, 2);
  EXPECT_EQ(r[0].in_digest, xxh3_128(x, sizeof(x)));
  EXPECT_EQ(r[1].phase, Phase::kCheckpoint);
  EXPECT_EQ(r[1].micro_batch, -1);
  EXPECT_EQ(r[2].phase, Phase::kBackward);
  EXPECT_EQ(r[2].root_world, 6);
  EXPECT_FALSE(r[2].in_digest.has_value()) << "only the root's broadcast input is meaningful";
  EXPECT_EQ(r[3].phase, Phase::kSetup);
  EXPECT_EQ(r[3].step, -1);
  for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i].seq, static_cast<int64_t>(i));
  EXPECT_EQ((*writer)->recent_lines().size(), 4u);
}

TEST(Watchdog, ReportsTheStuckOpDumpsRecentRecordsAndMarksTheTrace) {
  TempDir dir;
  auto writer = comm::TraceWriter::open(dir.path(), 0);
  ASSERT_TRUE(writer.ok());
  std::mutex mu;
  std::condition_variable cv;
  bool fired = false;
  comm::Watchdog dog(0.2, writer->get(), [&] {
    std::lock_guard<std::mutex> lock(mu);
    fired = true;
    cv.notify_all();
  });
  ASSERT_TRUE(dog.enabled());
  TraceContext ctx;
  auto c = traced("world", 0, {0, 1}, ctx, writer->get());
  float x[4] = {};
  for (int i = 0; i < 12; ++i) c->all_reduce(x, 4, DType::kF32, ReduceOp::kSum);  // fast ops never fire
  TraceRecord pending;
  pending.group = "pp[dp0.tp0]";
  pending.group_size = 2;
  pending.seq = 12;
  pending.op = OpKind::kRecv;
  pending.dtype = DType::kF32;
  pending.count = 64;
  pending.bytes = 256;
  pending.peer = 1;
  pending.peer_world = 5;
  pending.tag = 3;
  pending.phase = Phase::kForward;
  pending.step = 2;
  pending.micro_batch = 1;
  testing::internal::CaptureStderr();
  const uint64_t ticket = dog.begin(pending);
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return fired; });
  }
  dog.end(ticket);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(fired);
  EXPECT_NE(err.find("watchdog: recv on group 'pp[dp0.tp0]' (seq 12) has waited"), std::string::npos) << err;
  EXPECT_NE(err.find("count 64 F32, peer 1 (world 5) tag 3, phase forward, step 2, micro_batch 1"), std::string::npos)
      << err;
  EXPECT_NE(err.find("world rank 5 never posted the matching send"), std::string::npos) << err;
  EXPECT_NE(err.find("last 10 trace records"), std::string::npos) << err;
  const std::vector<std::string> lines = read_lines(comm::trace_file_path(dir.path(), 0));
  ASSERT_EQ(lines.size(), 13u);
  const TraceRecord last = *comm::trace_record_from_json(nlohmann::json::parse(lines.back()));
  EXPECT_TRUE(last.timed_out);
  EXPECT_EQ(last.seq, 12);
  EXPECT_EQ(last.t_end_us, 0);
  EXPECT_EQ(comm::Watchdog(0, nullptr).enabled(), false);
}

TEST(Watchdog, FiresOnAStuckTracedOpAndRecordsIt) {
  TempDir dir;
  auto writer = comm::TraceWriter::open(dir.path(), 3);
  ASSERT_TRUE(writer.ok());
  std::mutex mu;
  std::condition_variable cv;
  bool fired = false;
  comm::Watchdog dog(0.1, writer->get(), [&] {
    std::lock_guard<std::mutex> lock(mu);
    fired = true;
    cv.notify_all();
  });
  TraceContext ctx;
  auto inner = std::make_unique<FakeComm>("dp[tp0.pp0]", 1, std::vector<int>{1, 3});
  // The op blocks until the watchdog has fired, like an all_reduce whose peer never arrives.
  inner->hook = [&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return fired; });
  };
  comm::TracedCommunicator c(std::move(inner), ctx, writer->get(), &dog);
  comm::ScopedPhase phase(ctx, Phase::kGradSync, 7);
  float x[5] = {};
  testing::internal::CaptureStderr();
  c.all_reduce(x, 5, DType::kF32, ReduceOp::kSum);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(fired);
  EXPECT_NE(err.find("all_reduce on group 'dp[tp0.pp0]' (seq 0)"), std::string::npos) << err;
  EXPECT_NE(err.find("phase grad_sync, step 7"), std::string::npos) << err;
  const std::vector<std::string> lines = read_lines(comm::trace_file_path(dir.path(), 3));
  ASSERT_EQ(lines.size(), 2u);  // the timed-out record, then the completed op (the test's op returns)
  const TraceRecord stuck = *comm::trace_record_from_json(nlohmann::json::parse(lines[0]));
  EXPECT_TRUE(stuck.timed_out);
  EXPECT_GT(stuck.t_start_us, 0) << "the pending record carries its real start time";
  EXPECT_EQ(stuck.t_end_us, 0);
  EXPECT_EQ(stuck.step, 7);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::evidence
