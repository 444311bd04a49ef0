// The communicators of a run (mpi_communicator.h): the world, this rank's group on every axis of the
// process grid (MPI_Comm_split with color = the group's first world rank and key = the axis rank, checked
// against ProcessGrid), or the parameter-server layout. Each wraps its MPI_Comm in an MpiCommunicator
// (mpi_communicator.cc, through mpi_comm_wrap.h).
#include <algorithm>
#include <vector>

#include "comm/mpi_check.h"
#include "comm/mpi_comm_wrap.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_scope.h"
#include "core/check.h"

namespace sp::comm {

Communicator& GridCommunicators::axis(Axis a) {
  switch (a) {
    case Axis::kDp:
      return *dp;
    case Axis::kTp:
      return *tp;
    case Axis::kPp:
      break;
  }
  return *pp;
}

std::unique_ptr<Communicator> make_world_communicator(const MpiCommOptions& options) {
  SP_CHECK(MpiScope::initialized(), "make_world_communicator needs a live MpiScope");
  MPI_Comm comm;
  SP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  return wrap_mpi_comm(comm, "world", options);
}

GridCommunicators make_grid_communicators(const ProcessGrid& grid, const MpiCommOptions& options) {
  GridCommunicators out;
  out.world = make_world_communicator(options);
  const int rank = out.world->rank();
  SP_CHECK_EQ(grid.world_size(), out.world->size(), "the grid {} does not match the MPI world", grid.describe());
  const Coords coords = grid.coords_of(rank);
  MPI_Comm world_comm;
  SP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &world_comm));
  for (Axis a : kAllAxes) {
    const std::vector<int> members = grid.group_of(a, rank);
    MPI_Comm comm;
    // color = the group's first world rank identifies the group; key = axis rank orders it.
    SP_MPI_CHECK(MPI_Comm_split(world_comm, members[0], coords[a], &comm));
    auto c = wrap_mpi_comm(comm, grid.group_name(a, rank), options);
    SP_CHECK_EQ(c->rank(), coords[a], "group '{}': MPI rank differs from the {} coordinate", c->name(), axis_name(a));
    SP_CHECK(std::equal(members.begin(), members.end(), c->world_ranks().begin(), c->world_ranks().end()),
             "group '{}': MPI members differ from the grid's", c->name());
    (a == Axis::kDp ? out.dp : a == Axis::kTp ? out.tp : out.pp) = std::move(c);
  }
  SP_MPI_CHECK(MPI_Comm_free(&world_comm));
  return out;
}

GridCommunicators make_ps_communicators(const ProcessGrid& grid, const RoleMap& roles, const MpiCommOptions& options) {
  GridCommunicators out;
  out.world = make_world_communicator(options);
  SP_CHECK_EQ(roles.world_size(), out.world->size(), "{} workers + {} servers do not match the MPI world",
              roles.workers(), roles.servers());
  SP_CHECK_EQ(grid.world_size(), roles.workers(), "the worker grid {} does not match {} workers", grid.describe(),
              roles.workers());
  MPI_Comm ps;
  SP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &ps));
  out.ps = wrap_mpi_comm(ps, std::string(kPsGroupName), options);
  for (Axis a : kAllAxes) {
    MPI_Comm self;
    SP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_SELF, &self));
    auto c = wrap_mpi_comm(self, "self." + std::string(axis_name(a)), options);
    (a == Axis::kDp ? out.dp : a == Axis::kTp ? out.tp : out.pp) = std::move(c);
  }
  return out;
}

}  // namespace sp::comm
