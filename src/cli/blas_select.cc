// Re-executing with the CPU's OpenBLAS core (blas_select.h).
#include "cli/blas_select.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "kernels/blas_core.h"

namespace sp::cli {

namespace {

constexpr const char* kCoreVar = "OPENBLAS_CORETYPE";
constexpr const char* kFromVar = "SP_BLAS_CORE_FROM";  // set only by the re-exec: the core OpenBLAS had chosen

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? v : nullptr;
}

}  // namespace

void select_blas_core(char** argv) {
  if (env_or_null(kCoreVar) != nullptr || env_or_null(kFromVar) != nullptr) return;
  const std::string current = kernels::blas_core();
  const auto faster = kernels::faster_blas_core(current, kernels::cpu_vector_isa());
  if (!faster) return;
  if (setenv(kCoreVar, faster->c_str(), 1) != 0 || setenv(kFromVar, current.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // exec failed (no /proc): undo, so that children do not inherit a core this process does not run.
  unsetenv(kCoreVar);
  unsetenv(kFromVar);
}

std::string blas_core_origin() {
  const std::string core = kernels::blas_core();
  const char* from = env_or_null(kFromVar);
  const char* forced = env_or_null(kCoreVar);
  const std::string isa(kernels::isa_name(kernels::cpu_vector_isa()));
  if (from != nullptr && forced != nullptr)
    return core + " (selected by shardproof: OpenBLAS chose " + from + " on an " + isa + " CPU)";
  if (forced != nullptr) return core + " (OPENBLAS_CORETYPE=" + forced + " from the environment)";
  return core + " (OpenBLAS's choice on an " + isa + " CPU)";
}

}  // namespace sp::cli
