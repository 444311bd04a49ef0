// Fault program for the killed-rank test (driven by fault_driver.sh under mpirun): rank `victim`
// raises SIGKILL on itself in the middle of a loop of world all_reduces. mpirun must tear the job
// down and exit non-zero; the watchdog (a long timeout) is only the fallback.
// usage: rank_kill RUN_DIR WATCHDOG_TIMEOUT_S VICTIM_RANK
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "comm/mpi_communicator.h"
#include "comm/mpi_scope.h"
#include "comm/trace_writer.h"
#include "comm/traced_communicator.h"
#include "comm/watchdog.h"
#include "core/log.h"

int main(int argc, char** argv) {
  using namespace sp::comm;
  MpiScope mpi(&argc, &argv);
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s RUN_DIR WATCHDOG_TIMEOUT_S VICTIM_RANK\n", argv[0]);
    return 2;
  }
  const int victim = std::atoi(argv[3]);
  const ProcessGrid grid = *ProcessGrid::create(mpi.world_size(), 1, 1, ProcessGrid::kDefaultOrder, mpi.world_size());
  auto writer = TraceWriter::open(argv[1], mpi.world_rank());
  if (!writer.ok()) return 1;
  Watchdog watchdog(std::atof(argv[2]), writer->get());
  TraceContext ctx;
  GridCommunicators comms = make_grid_communicators(grid);
  trace_communicators(comms, ctx, writer->get(), &watchdog);
  float x[1024] = {};
  for (int step = 0; step < 1000000; ++step) {
    ScopedPhase phase(ctx, Phase::kForward, step);
    if (step == 20 && mpi.world_rank() == victim) {
      sp::log_info("rank {} raises SIGKILL at step {}", victim, step);
      std::raise(SIGKILL);
    }
    comms.world->all_reduce(x, 1024, sp::DType::kF32, ReduceOp::kSum);
  }
  return 0;
}
