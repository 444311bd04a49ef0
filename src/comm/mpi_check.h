// Internal to comm/: checks the return code of an MPI call. Not a public header (it includes mpi.h,
// which no code above comm/ may see). Every MPI call in comm/ goes through SP_MPI_CHECK: with
// MPI_ERRORS_RETURN installed (mpi_scope.h), a failing call returns here, is reported with the MPI
// error string, file:line and the rank prefix, and then the fatal handler aborts the job.
#pragma once

// C API only: keep Open MPI's and MPICH's deprecated C++ bindings out (they need libmpi_cxx).
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <string>

namespace sp::comm {

[[noreturn]] void mpi_call_failed(const char* call, int code, const char* file, int line);
std::string mpi_error_string(int code);

}  // namespace sp::comm

#define SP_MPI_CHECK(call)                                                \
  do {                                                                    \
    const int sp_mpi_rc_ = (call);                                        \
    if (sp_mpi_rc_ != MPI_SUCCESS) [[unlikely]]                           \
      ::sp::comm::mpi_call_failed(#call, sp_mpi_rc_, __FILE__, __LINE__); \
  } while (0)
