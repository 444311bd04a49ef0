#include "comm/trace_writer.h"

#include "core/file_io.h"
#include "core/log.h"

namespace sp::comm {

Result<std::unique_ptr<TraceWriter>> TraceWriter::open(const std::string& run_dir, int world_rank) {
  if (world_rank < 0) return invalid_argument("trace writer: world rank {} is negative", world_rank);
  SP_RETURN_IF_ERROR(make_directories(fmt::format("{}/{}", run_dir, kTraceDirName)));
  SP_ASSIGN_OR_RETURN(JsonlWriter out,
                      JsonlWriter::open(trace_file_path(run_dir, world_rank), JsonlWriter::Mode::kTruncate));
  return std::unique_ptr<TraceWriter>(new TraceWriter(std::move(out)));
}

void TraceWriter::append(const TraceRecord& record) {
  std::string line = trace_record_to_json(record);
  std::lock_guard<std::mutex> lock(mu_);
  if (!out_.status().ok()) return;
  out_.write_line(line);
  if (Status s = out_.flush(); !s.ok()) {
    log_error("{}; later trace records of this rank are dropped", s.message());
    return;
  }
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
  return out_.sync();
}

int64_t TraceWriter::records_written() const {
  std::lock_guard<std::mutex> lock(mu_);
  return written_;
}

Status TraceWriter::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return out_.status();
}

}  // namespace sp::comm
