// Shared test helpers: a scratch directory that cleans up after itself, and the source directory.
// Not a fixture framework: no GoogleTest here, so unit, MPI and checkpoint tests include it alike.
// Invariant: two TempDirs never share a path, across processes (the pid) and within one (a counter),
// so tests that run in parallel under ctest cannot clobber each other's files.
// Reference: docs/testing.md ("Shared test helpers").
#pragma once

#include <unistd.h>

#include <atomic>
#include <cerrno>  // program_invocation_short_name (glibc)
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

namespace sp::test {

// The repository root: $SP_SOURCE_DIR (ctest sets it), else the tree this test was built from.
inline std::string source_dir() {
  if (const char* e = std::getenv("SP_SOURCE_DIR"); e != nullptr && *e != '\0') return e;
  return SP_SOURCE_DIR;
}

// `<system temp>/sp_<tag>_<id>`: the one naming rule for test scratch space. `id` makes it unique;
// multi-rank tests pass rank 0's pid so that every rank names the same directory.
inline std::filesystem::path temp_path(std::string_view tag, int64_t id) {
  return std::filesystem::temp_directory_path() / ("sp_" + std::string(tag) + "_" + std::to_string(id));
}

// An empty directory created on construction (a stale one of the same name is removed first) and
// removed with everything in it on destruction. Unique per process and per instance; the tag (by
// default the test executable's name) only says whose a leftover directory was.
class TempDir {
 public:
  TempDir() : TempDir(program_invocation_short_name) {}
  explicit TempDir(std::string_view tag) {
    static std::atomic<int64_t> counter{0};
    const int64_t n = counter++;
    path_ = temp_path(std::string(tag) + "_" + std::to_string(::getpid()), n).string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;  // a destructor must not throw; a leftover directory is harmless
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // `path()/name` (name may contain subdirectories; nothing is created).
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

}  // namespace sp::test
