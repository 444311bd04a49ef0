// TraceWriter: the per-rank trace file DIR/trace/rank-NNNNN.jsonl, shared by all of the rank's
// TracedCommunicators. It is not a parser (evidence/trace_check.h reads the files back).
// Invariant: each record is one complete line handed to the kernel with a single write(2), so the
// file survives a crash or SIGKILL of the process as a valid prefix (at worst a torn last line if the
// machine itself fails). An I/O error does not stop training: it is remembered (status()), logged
// once, and later records are dropped; the run's final check reports it.
// Reference: docs/formats/trace.md.
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "comm/trace_record.h"
#include "core/json_io.h"
#include "core/status.h"

namespace sp::comm {

class TraceWriter {
 public:
  static constexpr size_t kRecentRecords = 10;  // kept for the watchdog's dump

  // Creates DIR/trace/ if needed and (re)creates the rank's file, truncating an old one.
  static Result<std::unique_ptr<TraceWriter>> open(const std::string& run_dir, int world_rank);
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // Thread-safe (the watchdog thread appends the timed-out record).
  void append(const TraceRecord& record);
  // The last kRecentRecords lines appended, oldest first.
  std::vector<std::string> recent_lines() const;
  // fsync(2): makes the file durable against a machine crash (a process crash needs nothing).
  Status sync();
  const std::string& path() const { return out_.path(); }
  int64_t records_written() const;
  // The first write error, or ok.
  Status status() const;

 private:
  explicit TraceWriter(JsonlWriter out) : out_(std::move(out)) {}
  JsonlWriter out_;  // one record per flush: one write(2)
  mutable std::mutex mu_;
  std::deque<std::string> recent_;
  int64_t written_ = 0;
};

}  // namespace sp::comm
