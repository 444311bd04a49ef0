#include "core/dir_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/file_io.h"
#include "core/machine.h"

namespace sp {

Result<DirectoryLock> DirectoryLock::acquire(const std::string& lock_path, const std::string& dir_label) {
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot open the lock file '{}': {}", lock_path, std::strerror(errno));
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    if (err != EWOULDBLOCK) return io_error("cannot lock '{}': {}", lock_path, std::strerror(err));
    auto holder = read_file(lock_path, 4096);
    std::string who = holder.ok() ? *holder : std::string();
    while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
    return failed_precondition("'{}' is in use by another process ({}), which holds '{}'", dir_label,
                               who.empty() ? "pid unknown: it has not written it yet" : who, lock_path)
        .with_hint("wait for it to end, or choose another directory");
  }
  // Ours: say who holds it (the previous holder's text is replaced whole).
  const std::string me = fmt::format("pid {} on host {}\n", ::getpid(), host_name());
  Status st;
  if (::ftruncate(fd, 0) != 0) st = io_error("cannot write the lock file '{}': {}", lock_path, std::strerror(errno));
  if (st.ok() && ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()))
    st = io_error("cannot write the lock file '{}': {}", lock_path, std::strerror(errno));
  if (!st.ok()) {
    ::close(fd);
    return st;
  }
  return DirectoryLock(fd, lock_path);
}

DirectoryLock& DirectoryLock::operator=(DirectoryLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    dir_ = std::move(o.dir_);
    remove_dir_ = o.remove_dir_;
    o.fd_ = -1;
    o.dir_.clear();
  }
  return *this;
}

void DirectoryLock::release() {
  if (fd_ < 0) return;
  if (!dir_.empty()) {  // still holding the lock: nobody else writes into the directory meanwhile
    namespace fs = std::filesystem;
    std::error_code ec;
    bool alone = true;
    for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec))
      alone = alone && fs::equivalent(e.path(), path_, ec);
    if (alone && !ec && ::unlink(path_.c_str()) == 0 && remove_dir_) ::rmdir(dir_.c_str());
    dir_.clear();
  }
  ::flock(fd_, LOCK_UN);
  ::close(fd_);
  fd_ = -1;
}

}  // namespace sp
