#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace sp {
namespace {
Status errno_status(const char* what, const std::string& path) {
  return io_error("{} '{}': {}", what, path, std::strerror(errno));
}
}  // namespace

Status write_all(int fd, std::string_view bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
  return Status();
}

Result<std::string> read_file(const std::string& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return not_found("file '{}' does not exist", path);
    return errno_status("cannot open", path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return errno_status("cannot stat", path);
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return corrupt("file '{}' is {} bytes, more than the {} allowed here", path, st.st_size, max_bytes);
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return errno_status("cannot read", path);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

Status write_file(const std::string& path, std::string_view bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status("cannot create", path);
  Status s = write_all(fd, bytes, path);
  if (s.ok() && ::fsync(fd) != 0) s = errno_status("cannot fsync", path);
  if (::close(fd) != 0 && s.ok()) s = errno_status("cannot close", path);
  return s;
}

Status fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status("cannot open directory", dir);
  Status s;
  if (::fsync(fd) != 0) s = errno_status("cannot fsync directory", dir);
  ::close(fd);
  return s;
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  if (Status s = write_file(tmp, bytes); !s.ok()) {
    ::unlink(tmp.c_str());  // a full disk leaves no partial or zero-byte temporary behind
    return Status(s.code(), "'" + path + "' not written: " + s.message(), s.hint());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = errno_status("cannot rename into", path);
    ::unlink(tmp.c_str());
    return s;
  }
  return fsync_directory(std::filesystem::path(path).parent_path().string());
}

Status make_directories(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create directory '{}': {}", dir, ec.message());
  return Status();
}

bool path_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

Status check_input_file(std::string_view flag, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return invalid_argument("{} '{}': no such file", flag, path).with_hint("check the path");
  if (!std::filesystem::is_regular_file(path, ec))
    return invalid_argument("{} '{}' is not a regular file", flag, path).with_hint("check the path");
  return Status();
}

}  // namespace sp
