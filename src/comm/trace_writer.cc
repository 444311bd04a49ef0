#include "comm/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/file_io.h"
#include "core/log.h"

namespace sp::comm {

Result<std::unique_ptr<TraceWriter>> TraceWriter::open(const std::string& run_dir, int world_rank) {
  if (world_rank < 0) return invalid_argument("trace writer: world rank {} is negative", world_rank);
  const std::string dir = fmt::format("{}/{}", run_dir, kTraceDirName);
  SP_RETURN_IF_ERROR(make_directories(dir));
  std::string path = trace_file_path(run_dir, world_rank);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot create trace file '{}': {}", path, std::strerror(errno));
  return std::unique_ptr<TraceWriter>(new TraceWriter(fd, std::move(path)));
}

TraceWriter::~TraceWriter() { ::close(fd_); }

void TraceWriter::append(const TraceRecord& record) {
  std::string line = trace_record_to_json(record);
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(mu_);
  if (!status_.ok()) return;
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status_ = io_error("cannot write trace file '{}': {}", path_, n < 0 ? std::strerror(errno) : "short write");
      log_error("{}; later trace records of this rank are dropped", status_.message());
      return;
    }
    done += static_cast<size_t>(n);
  }
  line.pop_back();
  recent_.push_back(std::move(line));
  if (recent_.size() > kRecentRecords) recent_.pop_front();
  ++written_;
}

std::vector<std::string> TraceWriter::recent_lines() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {recent_.begin(), recent_.end()};
}

Status TraceWriter::sync() {
  std::lock_guard<std::mutex> lock(mu_);
  if (::fsync(fd_) != 0) return io_error("cannot fsync trace file '{}': {}", path_, std::strerror(errno));
  return Status();
}

int64_t TraceWriter::records_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return written_;
}

Status TraceWriter::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

}  // namespace sp::comm
