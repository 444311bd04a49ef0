// MpiScope: RAII around MPI_Init_thread / MPI_Finalize, the one process-wide object (STYLE.md §7).
// It is not a communicator: make_world_communicator() and make_grid_communicators() build those.
// Invariant: while a scope is alive, every SP_CHECK failure calls MPI_Abort(MPI_COMM_WORLD, 1), so a
// broken invariant on one rank never leaves a peer waiting, and MPI_COMM_WORLD (and every
// communicator derived from it) returns error codes instead of aborting silently: comm/ checks each.
// Threads: MPI_THREAD_MULTIPLE is requested; MPI_THREAD_FUNNELED is the minimum required, because
// the engine issues every MPI call from the thread that created the scope (the watchdog thread
// never calls MPI). Reference: docs/comm.md §2.
#pragma once

#include <string>
#include <string_view>

namespace sp::comm {

enum class ThreadLevel { kSingle = 0, kFunneled = 1, kSerialized = 2, kMultiple = 3 };
std::string_view thread_level_name(ThreadLevel level);  // "MPI_THREAD_MULTIPLE", ...

class MpiScope {
 public:
  static constexpr ThreadLevel kRequired = ThreadLevel::kFunneled;

  // argc/argv may be null. SP_CHECK if MPI was already initialized or provides less than kRequired.
  MpiScope(int* argc, char*** argv);
  ~MpiScope();
  MpiScope(const MpiScope&) = delete;
  MpiScope& operator=(const MpiScope&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  const std::string& hostname() const { return hostname_; }
  // MPI_Get_library_version, first line ("Open MPI v4.1.4, package: ...").
  const std::string& library_version() const { return library_version_; }
  ThreadLevel thread_level() const { return thread_level_; }

  // True between MPI_Init_thread and MPI_Finalize (of any scope in this process).
  static bool initialized();

 private:
  int world_rank_ = 0;
  int world_size_ = 1;
  std::string hostname_;
  std::string library_version_;
  ThreadLevel thread_level_ = ThreadLevel::kSingle;
};

}  // namespace sp::comm
