// Fault program for the watchdog test (driven by fault_driver.sh under mpirun, not a GoogleTest):
// every rank traces a few world all_reduces, then rank `stuck` sleeps forever instead of joining
// the next one. The other ranks' watchdogs must report the pending all_reduce, dump their last
// trace records, mark the op timed_out in the trace and end the job with a non-zero status.
// usage: watchdog_hang RUN_DIR TIMEOUT_S STUCK_RANK
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "comm/mpi_communicator.h"
#include "comm/mpi_scope.h"
#include "comm/topology.h"
#include "comm/trace_writer.h"
#include "comm/traced_communicator.h"
#include "comm/watchdog.h"
#include "core/log.h"

int main(int argc, char** argv) {
  using namespace sp::comm;
  MpiScope mpi(&argc, &argv);
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s RUN_DIR TIMEOUT_S STUCK_RANK\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const double timeout = std::atof(argv[2]);
  const int stuck = std::atoi(argv[3]);
  const ProcessGrid grid = *ProcessGrid::create(mpi.world_size(), 1, 1, ProcessGrid::kDefaultOrder, mpi.world_size());
  auto writer = TraceWriter::open(dir, mpi.world_rank());
  if (!writer.ok()) {
    sp::log_error("{}", writer.status().to_string());
    return 1;
  }
  Watchdog watchdog(timeout, writer->get());
  TraceContext ctx;
  GridCommunicators comms = make_grid_communicators(grid);
  trace_communicators(comms, ctx, writer->get(), &watchdog);
  if (!write_topology(*comms.world, grid, dir).ok()) return 1;
  float x[16] = {};
  for (int step = 0; step < 3; ++step) {
    ScopedPhase phase(ctx, Phase::kGradSync, step);
    comms.world->all_reduce(x, 16, sp::DType::kF32, ReduceOp::kSum);
  }
  ScopedPhase phase(ctx, Phase::kGradSync, 3);
  if (mpi.world_rank() == stuck) {
    sp::log_info("rank {} now sleeps instead of joining the step-3 all_reduce", stuck);
    for (;;) ::sleep(1000);
  }
  comms.world->all_reduce(x, 16, sp::DType::kF32, ReduceOp::kSum);
  sp::log_error("the step-3 all_reduce completed without rank {}: the test is broken", stuck);
  return 0;
}
