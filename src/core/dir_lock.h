// DirectoryLock: one process at a time owns a directory, through flock(2) on a lock file inside it.
// The holder writes its pid (and host) into the file, so a refused process can name it. The lock
// ends with the holder (close, exit, crash or SIGKILL: the kernel releases it), so a stale lock file
// never blocks anyone; the file itself stays, unless the holder asked for remove_if_alone and wrote nothing
// else into the directory (a run that failed before its first file leaves --out as it found it). Advisory: it excludes
// only processes that ask for it. Not a lock across hosts unless the file system implements flock across them (NFS
// does, as POSIX locks; some do not: docs/checkpoints.md). Invariant: while a DirectoryLock is alive, no other
// DirectoryLock on the same file exists anywhere on this host.
#pragma once

#include <string>

#include "core/status.h"

namespace sp {

class DirectoryLock {
 public:
  // Creates `lock_path` if needed and takes the lock without waiting. Held by another process:
  // failed_precondition naming `dir_label` and the holder's pid and host.
  static Result<DirectoryLock> acquire(const std::string& lock_path, const std::string& dir_label);
  DirectoryLock() = default;  // holds nothing
  DirectoryLock(DirectoryLock&& o) noexcept
      : fd_(o.fd_), path_(std::move(o.path_)), dir_(std::move(o.dir_)), remove_dir_(o.remove_dir_) {
    o.fd_ = -1;
    o.dir_.clear();
  }
  DirectoryLock& operator=(DirectoryLock&& o) noexcept;
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;
  ~DirectoryLock() { release(); }

  bool held() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }
  // On release, if `dir` (the lock file's directory) holds nothing but the lock file: remove the lock file,
  // and `dir` itself when `remove_dir` (the holder created it).
  void remove_if_alone(std::string dir, bool remove_dir) {
    dir_ = std::move(dir);
    remove_dir_ = remove_dir;
  }
  void release();

 private:
  DirectoryLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::string path_;
  std::string dir_;  // remove_if_alone
  bool remove_dir_ = false;
};

}  // namespace sp
