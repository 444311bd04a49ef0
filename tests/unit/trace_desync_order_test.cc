// Which rank the trace checker names when one rank issues an extra collective and the stopped job kills the
// others in whatever order (issue 33: LSL-K, desync-extra-collective@2:2 on dp 4, sometimes named dp rank 0).
// The traces are synthetic and shaped as LSL-K's: per step a reduce-scatter (all_to_all) and an all_gather on
// the dp group, then an fp64 all_reduce on the world group (evidence); at step 2 rank 2 first issues one extra
// int64 all_reduce on the world group, which the others' fp64 all_reduce meets, and rank 2 fails inside it.
// Every way the job can end is written: each of ranks 0, 1, 3 killed inside its last dp op (recorded by the
// others, not by itself) or failing inside it, the same in the world op, or after recording it; with each rank
// first to start step 2. The
// first mismatch must name rank 2 alone, every time.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>

#include "comm/trace_record.h"
#include "comm/trace_writer.h"
#include "evidence/trace_check.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::evidence {
namespace {
namespace SP_TEST_ID {
using comm::OpKind;
using comm::Phase;
using comm::TraceRecord;

constexpr int kWorld = 4, kDeviant = 2, kSteps = 3;
const std::vector<int> kMembers = {0, 1, 2, 3};

// How a rank other than the deviant ended: killed inside step 2's dp all_gather (which the others completed)
// before recording it, failed inside it (an aborted record: the job was failing around it), the same two in
// the world all_reduce, or after recording that all_reduce.
enum class End { kInDp, kAbortedInDp, kInWorld, kAbortedInWorld, kRecorded };

struct Writer {
  int rank;
  std::map<std::string, int64_t> seq{};
  std::vector<TraceRecord> records{};

  void add(const std::string& group, OpKind op, DType dtype, int64_t count, Phase phase, int64_t step, int64_t t_us,
           bool aborted = false) {
    TraceRecord r;
    r.group = group;
    r.group_size = kWorld;
    r.group_rank = rank;
    if (!seq.count(group)) r.members = kMembers;
    r.seq = seq[group]++;
    r.op = op;
    r.dtype = dtype;
    r.count = count;
    if (op == OpKind::kAllToAll) r.counts = r.recv_counts = std::vector<int64_t>(kWorld, count / kWorld);
    if (op == OpKind::kAllGather) r.counts = std::vector<int64_t>(kWorld, count / kWorld);
    if (op == OpKind::kAllReduce) r.reduce = comm::ReduceOp::kSum;
    r.bytes = count * static_cast<int64_t>(dtype_size(dtype));
    r.wire_bytes = comm::wire_bytes_of(op, r.bytes, kWorld);
    r.phase = phase;
    r.step = step;
    r.t_start_us = t_us;
    r.t_end_us = aborted ? 0 : t_us + 5;
    r.aborted = aborted;
    records.push_back(std::move(r));
  }
};

// One rank's trace: `end` says where a non-deviant rank stopped in step 2; `order` its position in the
// arrival order of step 2 (it shifts every start time of that step).
void write_rank(const std::string& dir, int rank, End end, int order) {
  Writer w{.rank = rank};
  for (int64_t step = 0; step < kSteps; ++step) {
    const int64_t t = 1000 * step + (step == kSteps - 1 ? 10 * order : rank);
    const bool last = step == kSteps - 1;
    w.add("dp[tp0.pp0]", OpKind::kAllToAll, DType::kF32, 64, Phase::kGradSync, step, t);
    if (last && rank != kDeviant && end == End::kInDp) break;
    w.add("dp[tp0.pp0]", OpKind::kAllGather, DType::kF32, 64, Phase::kGradSync, step, t + 1,
          last && end == End::kAbortedInDp);
    if (last && end == End::kAbortedInDp) break;
    if (last && rank == kDeviant) {  // the extra collective, in which rank 2 fails
      w.add("world", OpKind::kAllReduce, DType::kI64, 1, Phase::kEvidence, step, t + 2, true);
      break;
    }
    if (last && end == End::kInWorld) break;
    w.add("world", OpKind::kAllReduce, DType::kF64, 4, Phase::kEvidence, step, t + 3,
          last && end == End::kAbortedInWorld);
  }
  Result<std::unique_ptr<comm::TraceWriter>> out = comm::TraceWriter::open(dir, rank);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (const TraceRecord& r : w.records) (*out)->append(r);
  ASSERT_TRUE((*out)->status().ok());
}

TEST(TraceDesyncOrder, TheRankThatIssuedTheExtraCollectiveIsNamedWhateverTheOrder) {
  const std::array<End, 5> ends = {End::kInDp, End::kAbortedInDp, End::kInWorld, End::kAbortedInWorld, End::kRecorded};
  int cases = 0;
  for (End e0 : ends)
    for (End e1 : ends)
      for (End e3 : ends) {
        for (int shift = 0; shift < kWorld; ++shift) {  // who starts step 2 first: each rank once
          std::array<int, kWorld> order{};
          for (int r = 0; r < kWorld; ++r) order[static_cast<size_t>(r)] = (r + shift) % kWorld;
          sp::test::TempDir dir;
          const std::array<End, kWorld> end = {e0, e1, End::kRecorded, e3};
          for (int r = 0; r < kWorld; ++r)
            write_rank(dir.path(), r, end[static_cast<size_t>(r)], order[static_cast<size_t>(r)]);
          Result<TraceReport> report = check_trace_dir(dir.path());
          ASSERT_TRUE(report.ok()) << report.status().to_string();
          ASSERT_FALSE(report->consistent());
          const TraceMismatch& first = report->mismatches.front();
          EXPECT_EQ(first.ranks, std::vector<int>{kDeviant})
              << "ends " << int(e0) << int(e1) << int(e3) << ", order " << order[0] << order[1] << order[2] << order[3]
              << ": " << first.message << "\n"
              << report->summary();
          EXPECT_EQ(first.group, "world") << first.message;
          EXPECT_EQ(first.step, 2) << first.message;
          ++cases;
        }
      }
  EXPECT_EQ(cases, 125 * 4);
}

// A member killed after an op of a new step completed on the others but before its own first record of that
// step (its last record is of the step before) joined that op too (it completes only once all joined): not the
// desync (issue 45: the rule required the op's step to be the member's last recorded one, so such a member was
// named). Ranks 1-3 record step 2's dp all_to_all, rank 0 nothing of step 2, and rank 2 then fails inside its
// extra world all_reduce: rank 2 is named, on the world group, at step 2.
TEST(TraceDesyncOrder, AMemberKilledBeforeItsFirstRecordOfTheStepIsNotTheDesync) {
  sp::test::TempDir dir;
  for (int r = 0; r < kWorld; ++r) {
    Writer w{.rank = r};
    for (int64_t step = 0; step < kSteps; ++step) {
      const int64_t t = 1000 * step + r;
      if (step == kSteps - 1 && r == 0) break;  // killed before recording anything of step 2
      w.add("dp[tp0.pp0]", OpKind::kAllToAll, DType::kF32, 64, Phase::kGradSync, step, t);
      if (step == kSteps - 1) {
        if (r == kDeviant) w.add("world", OpKind::kAllReduce, DType::kI64, 1, Phase::kEvidence, step, t + 2, true);
        break;
      }
      w.add("dp[tp0.pp0]", OpKind::kAllGather, DType::kF32, 64, Phase::kGradSync, step, t + 1);
      w.add("world", OpKind::kAllReduce, DType::kF64, 4, Phase::kEvidence, step, t + 3);
    }
    Result<std::unique_ptr<comm::TraceWriter>> out = comm::TraceWriter::open(dir.path(), r);
    ASSERT_TRUE(out.ok());
    for (const TraceRecord& rec : w.records) (*out)->append(rec);
  }
  Result<TraceReport> report = check_trace_dir(dir.path());
  ASSERT_TRUE(report.ok());
  ASSERT_FALSE(report->consistent());
  const TraceMismatch& first = report->mismatches.front();
  EXPECT_EQ(first.ranks, std::vector<int>{kDeviant}) << first.message << "\n" << report->summary();
  EXPECT_EQ(first.group, "world") << first.message;
  EXPECT_EQ(first.step, 2) << first.message;
}

// The negative twin: the same missing dp record in a job that was not stopped (no rank failed inside an op) is
// a mismatch naming the rank that lacks it.
TEST(TraceDesyncOrder, AMissingOpInAJobThatWasNotStoppedIsStillAMismatch) {
  sp::test::TempDir dir;
  for (int r = 0; r < kWorld; ++r) {
    Writer w{.rank = r};
    for (int64_t step = 0; step < kSteps; ++step) {
      w.add("dp[tp0.pp0]", OpKind::kAllToAll, DType::kF32, 64, Phase::kGradSync, step, 1000 * step);
      if (r == 0 && step == kSteps - 1) break;
      w.add("dp[tp0.pp0]", OpKind::kAllGather, DType::kF32, 64, Phase::kGradSync, step, 1000 * step + 1);
    }
    Result<std::unique_ptr<comm::TraceWriter>> out = comm::TraceWriter::open(dir.path(), r);
    ASSERT_TRUE(out.ok());
    for (const TraceRecord& rec : w.records) (*out)->append(rec);
  }
  Result<TraceReport> report = check_trace_dir(dir.path());
  ASSERT_TRUE(report.ok());
  ASSERT_FALSE(report->consistent());
  EXPECT_EQ(report->mismatches.front().kind, "missing_op");
  EXPECT_EQ(report->mismatches.front().ranks, std::vector<int>{0});
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::evidence
