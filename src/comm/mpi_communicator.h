// MPI implementations of Communicator, built by factories so that no header above comm/ sees mpi.h.
// Not traced: wrap the result in TracedCommunicator (traced_communicator.h) to record each op.
// Invariant: the world communicator is a duplicate of MPI_COMM_WORLD and each axis communicator is
// MPI_Comm_split(world, color = the group's first world rank, key = axis rank), so group rank ==
// axis coordinate and world_ranks() == ProcessGrid::group_of(axis, rank); both are checked.
// Counts above MpiCommOptions::max_count (2^31 − 1 by default, MPI's int limit) are split into
// several MPI calls; the split is decided from values equal on every rank, so all ranks take the
// same path. Reference: docs/comm.md §3.
#pragma once

#include <climits>
#include <cstdint>
#include <memory>

#include "comm/communicator.h"
#include "comm/process_grid.h"
#include "comm/roles.h"

namespace sp::comm {

struct MpiCommOptions {
  // Largest element count (and displacement) handed to one MPI call. Tests lower it to exercise
  // the split paths without 8 GiB buffers.
  int64_t max_count = INT_MAX;
};

// Requires a live MpiScope.
std::unique_ptr<Communicator> make_world_communicator(const MpiCommOptions& options = {});

// The world and this rank's group on every axis. A group of size 1 is a real (trivial) communicator,
// so degree-1 axes run the same code path as any other.
struct GridCommunicators {
  std::unique_ptr<Communicator> world;
  std::unique_ptr<Communicator> dp;
  std::unique_ptr<Communicator> tp;
  std::unique_ptr<Communicator> pp;
  std::unique_ptr<Communicator> ps;  // parameter server: every rank, for pushes and pulls; null otherwise

  Communicator& axis(Axis a);
};

// Collective over MPI_COMM_WORLD; SP_CHECK if grid.world_size() differs from the MPI world size
// (validate the configuration with ProcessGrid::create before calling this).
GridCommunicators make_grid_communicators(const ProcessGrid& grid, const MpiCommOptions& options = {});

// Collective over MPI_COMM_WORLD: the parameter-server layout (roles.h). `world`; `ps`, every rank in
// world-rank order (pushes and pulls are point to point on it); and as dp, tp and pp one-rank
// communicators ("self.dp", ...): a worker never reduces over the grid's axes (its gradients go to the
// servers), so its axis operations are the degree-1 no-ops of the same code path, and a server has no
// axes. SP_CHECK if roles.world_size() differs from the MPI world size.
GridCommunicators make_ps_communicators(const ProcessGrid& grid, const RoleMap& roles,
                                        const MpiCommOptions& options = {});

}  // namespace sp::comm
