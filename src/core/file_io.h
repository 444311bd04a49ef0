// Whole-file reads and crash-safe writes. Every error names the path.
// write_file_atomic: write `path.tmp.<pid>`, fsync it, rename over `path`, fsync the directory, so a
// reader sees the old file or the new one, never a torn one (docs/formats/checkpoint.md relies on it);
// on failure the temporary is removed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace sp {

// Reads at most `max_bytes`; a larger file is an error (bounded allocation on untrusted input).
Result<std::string> read_file(const std::string& path, uint64_t max_bytes = uint64_t{1} << 34);
Status write_file(const std::string& path, std::string_view bytes);  // plain, with fsync
Status write_file_atomic(const std::string& path, std::string_view bytes);
Status fsync_directory(const std::string& dir);
Status make_directories(const std::string& dir);
// Writes all of `bytes` to the open descriptor `fd` (retrying short writes and EINTR); errors name `path`.
Status write_all(int fd, std::string_view bytes, const std::string& path);
bool path_exists(const std::string& path);
// An input file named by `flag` ("--tokens", "lab LSL-P: script") must exist and be a regular file: a usage
// error (exit 2) naming both.
Status check_input_file(std::string_view flag, const std::string& path);

}  // namespace sp
