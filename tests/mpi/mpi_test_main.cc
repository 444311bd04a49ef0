// main() of every multi-rank GoogleTest executable (tests/CMakeLists.txt: sp_mpi_test).
// MPI comes up through MpiScope (so SP_CHECK aborts the whole job, never leaves a peer waiting);
// rank 0 prints the usual GoogleTest output, other ranks print only their failed assertions
// (prefixed with the rank), and the exit code is non-zero on every rank if ANY rank failed.
// Tests must keep their communication schedule independent of assertion outcomes (EXPECT_*, not
// ASSERT_*, around collectives), or a failure on one rank becomes a hang on the others.
#include <gtest/gtest.h>

#include <cstdio>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_scope.h"

namespace {

class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                 r.summary());
    std::fflush(stderr);
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (info.result()->Failed())
      std::fprintf(stderr, "[rank %d] FAILED %s.%s\n", rank_, info.test_suite_name(), info.name());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  sp::comm::MpiScope mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (mpi.world_rank() != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(mpi.world_rank()));
  }
  const int rc = RUN_ALL_TESTS();
  int64_t failed = rc != 0 ? 1 : 0;
  {
    auto world = sp::comm::make_world_communicator();
    world->all_reduce(&failed, 1, sp::DType::kI64, sp::comm::ReduceOp::kMax);
  }
  if (mpi.world_rank() == 0 && failed != 0 && rc == 0)
    std::fprintf(stderr, "FAILED: a test failed on another rank (see its [rank N] lines)\n");
  return failed != 0 ? 1 : 0;
}
