// Watchdog: turns a communication op that never completes into a clear error instead of a hang.
// It is not a recovery mechanism: it reports and terminates; mpirun then tears down the other ranks.
// TracedCommunicator calls begin() before and end() after every blocking op (and every wait() of a
// non-blocking one). When one op has been in flight longer than the timeout, a monitor thread
//   1. prints on stderr what this rank was waiting for (group, seq, op, count, dtype, root/peer,
//      phase, step, micro-batch, how long), then the rank's last 10 trace records;
//   2. appends the pending op to the trace with "timed_out": true and fsyncs the trace file;
//   3. for a collective, names the member that never reached the op (stall_diagnosis.h: the members'
//      traces and, on this host, their processes; up to a grace period of a quarter of the timeout,
//      1 to 10 s, while the other live members' watchdogs fire too);
//   4. calls the terminate handler (default std::_Exit(1): never blocks, whatever MPI is doing).
// The monitor thread never calls MPI. timeout 0 = off (no thread). Reference: docs/comm.md §6.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <thread>

#include "comm/trace_record.h"

namespace sp::comm {

class TraceWriter;

class Watchdog {
 public:
  // Production handlers do not return; a test's handler may, and the watchdog then forgets the op.
  using Terminate = std::function<void()>;
  static constexpr int kExitCode = 1;

  // `writer` (may be null) supplies the last records and receives the timed-out record; it must
  // outlive the watchdog. An empty `terminate` means std::_Exit(kExitCode).
  Watchdog(double timeout_s, TraceWriter* writer, Terminate terminate = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  bool enabled() const { return timeout_ns_ > 0; }
  double timeout_s() const { return static_cast<double>(timeout_ns_) * 1e-9; }

  // `pending` describes the op (its t_end_us and digests are not used); `members` are its group's
  // world ranks (they must outlive the op). Returns a ticket for end().
  uint64_t begin(const TraceRecord& pending, std::span<const int> members = {});
  void end(uint64_t ticket);

  // Appends every op in flight to the trace marked "aborted" and syncs it: the last words of a rank
  // that fails a check inside a collective (installed with set_before_fatal by the trainer), so the
  // trace checker sees the op this rank died in. Needs the watchdog enabled (it tracks the ops).
  void record_aborted();

  // The stderr report for `pending` after `waited_s` seconds (exposed for tests).
  static std::string describe(const TraceRecord& pending, double waited_s, double timeout_s);

 private:
  struct InFlight {
    TraceRecord record;
    int64_t start_ns;
    std::span<const int> members;
  };
  void monitor();
  void fire(const InFlight& op, int64_t now);

  const int64_t timeout_ns_;
  TraceWriter* writer_;
  Terminate terminate_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, InFlight> in_flight_;  // ticket → op; tickets increase, so begin() order
  uint64_t next_ticket_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace sp::comm
