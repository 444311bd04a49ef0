// Internal to comm/: the one way to turn an MPI_Comm into a Communicator (the MpiCommunicator class of
// mpi_communicator.cc), for the group factories of mpi_groups.cc. Not a public header: it includes mpi.h
// (through mpi_check.h), which no code above comm/ may see.
#pragma once

#include <memory>
#include <string>

#include "comm/mpi_check.h"
#include "comm/mpi_communicator.h"

namespace sp::comm {

// Takes ownership of `comm` (freed with the communicator); `name` is the group's (process_grid.h).
std::unique_ptr<Communicator> wrap_mpi_comm(MPI_Comm comm, std::string name, const MpiCommOptions& options);

}  // namespace sp::comm
