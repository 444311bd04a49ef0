#include "comm/mpi_scope.h"

#include <unistd.h>

#include <atomic>

#include "comm/mpi_check.h"
#include "core/check.h"
#include "core/log.h"

namespace sp::comm {
namespace {
std::atomic<bool> g_alive{false};
}  // namespace

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return fmt::format("MPI error code {}", code);
  return std::string(text, static_cast<size_t>(len));
}

void mpi_call_failed(const char* call, int code, const char* file, int line) {
  check_failed(file, line, call, fmt::format("MPI call failed with code {}: {}", code, mpi_error_string(code)));
}

std::string_view thread_level_name(ThreadLevel level) {
  switch (level) {
    case ThreadLevel::kSingle:
      return "MPI_THREAD_SINGLE";
    case ThreadLevel::kFunneled:
      return "MPI_THREAD_FUNNELED";
    case ThreadLevel::kSerialized:
      return "MPI_THREAD_SERIALIZED";
    case ThreadLevel::kMultiple:
      return "MPI_THREAD_MULTIPLE";
  }
  return "?";
}

static ThreadLevel thread_level_from_mpi(int level) {
  if (level == MPI_THREAD_MULTIPLE) return ThreadLevel::kMultiple;
  if (level == MPI_THREAD_SERIALIZED) return ThreadLevel::kSerialized;
  if (level == MPI_THREAD_FUNNELED) return ThreadLevel::kFunneled;
  return ThreadLevel::kSingle;
}

MpiScope::MpiScope(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  SP_CHECK(!initialized, "MPI is already initialized: construct exactly one MpiScope per process");
  int provided = MPI_THREAD_SINGLE;
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  SP_CHECK(rc == MPI_SUCCESS, "MPI_Init_thread failed with code {}", rc);
  g_alive = true;
  // From here on a broken invariant aborts the whole job instead of leaving peers in a collective.
  set_fatal_handler([] { MPI_Abort(MPI_COMM_WORLD, 1); });
  SP_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  SP_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
  SP_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
  SP_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
  set_log_rank(world_rank_);

  thread_level_ = thread_level_from_mpi(provided);
  SP_CHECK(static_cast<int>(thread_level_) >= static_cast<int>(kRequired),
           "MPI provides {}, the engine needs at least {}", thread_level_name(thread_level_),
           thread_level_name(kRequired));

  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  SP_MPI_CHECK(MPI_Get_library_version(version, &len));
  library_version_.assign(version, static_cast<size_t>(len));
  if (const size_t eol = library_version_.find('\n'); eol != std::string::npos) library_version_.resize(eol);

  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  hostname_ = host[0] != '\0' ? host : "unknown";
}

MpiScope::~MpiScope() {
  set_fatal_handler({});
  g_alive = false;
  MPI_Finalize();
}

bool MpiScope::initialized() { return g_alive; }

}  // namespace sp::comm
