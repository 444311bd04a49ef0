#include "comm/watchdog.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "comm/stall_diagnosis.h"
#include "comm/trace_writer.h"
#include "core/log.h"
#include "core/timer.h"

namespace sp::comm {

Watchdog::Watchdog(double timeout_s, TraceWriter* writer, Terminate terminate)
    : timeout_ns_(timeout_s > 0 ? static_cast<int64_t>(timeout_s * 1e9) : 0),
      writer_(writer),
      terminate_(std::move(terminate)) {
  if (enabled()) thread_ = std::thread([this] { monitor(); });
}

Watchdog::~Watchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t Watchdog::begin(const TraceRecord& pending, std::span<const int> members) {
  if (!enabled()) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  const bool was_idle = in_flight_.empty();
  const uint64_t ticket = next_ticket_++;
  in_flight_.emplace(ticket, InFlight{pending, now_ns(), members});
  // The monitor sleeps without a deadline while nothing is in flight; wake it to arm one.
  if (was_idle) cv_.notify_all();
  return ticket;
}

void Watchdog::end(uint64_t ticket) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.erase(ticket);
}

void Watchdog::monitor() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (in_flight_.empty()) {
      cv_.wait(lock);
      continue;
    }
    // Tickets increase with begin() time, so the first entry is the op that has waited longest.
    const auto oldest = in_flight_.begin();
    const int64_t deadline = oldest->second.start_ns + timeout_ns_;
    const int64_t now = now_ns();
    if (now >= deadline) {
      fire(oldest->second, now);
      in_flight_.erase(oldest);  // only reached when a test's terminate handler returns
      continue;
    }
    cv_.wait_for(lock, std::chrono::nanoseconds(deadline - now));
  }
}

std::string Watchdog::describe(const TraceRecord& r, double waited_s, double timeout_s) {
  std::string what =
      fmt::format("watchdog: {} on group '{}' (seq {}) has waited {:.1f} s, more than the {:g} s timeout",
                  op_kind_name(r.op), r.group, r.seq, waited_s, timeout_s);
  if (r.op != OpKind::kBarrier) what += fmt::format(": count {} {}", r.count, dtype_name(r.dtype));
  if (r.reduce) what += fmt::format(" {}", reduce_op_name(*r.reduce));
  if (r.root >= 0) what += fmt::format(", root {} (world {})", r.root, r.root_world);
  if (r.peer >= 0) what += fmt::format(", peer {} (world {}) tag {}", r.peer, r.peer_world, r.tag);
  what += fmt::format(", phase {}, step {}, micro_batch {}", phase_name(r.phase), r.step, r.micro_batch);
  if (op_is_p2p(r.op)) {
    what += fmt::format("\n  hint: world rank {} never posted the matching {}", r.peer_world,
                        r.op == OpKind::kSend || r.op == OpKind::kIsend ? "receive" : "send");
  } else {
    what += fmt::format(
        "\n  hint: another member of '{}' never reached seq {}; `shardproof trace check DIR` names the rank whose "
        "trace stops early",
        r.group, r.seq);
  }
  return what;
}

void Watchdog::record_aborted() {
  if (writer_ == nullptr || !enabled()) return;
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);  // never wait on a dying rank
  if (!lock.owns_lock()) return;
  for (const auto& [ticket, op] : in_flight_) {
    TraceRecord aborted = op.record;
    aborted.aborted = true;
    aborted.t_end_us = 0;
    aborted.out_digest.reset();
    writer_->append(aborted);
  }
  (void)writer_->sync();
}

void Watchdog::fire(const InFlight& op, int64_t now) {
  const double waited = static_cast<double>(now - op.start_ns) * 1e-9;
  log_error("{}", describe(op.record, waited, timeout_s()));
  if (writer_ != nullptr) {
    const std::vector<std::string> recent = writer_->recent_lines();
    log_error("last {} trace records of this rank ({}):", recent.size(), writer_->path());
    std::string dump;
    for (const std::string& line : recent) dump += fmt::format("{} | {}\n", log_prefix(), line);
    std::fwrite(dump.data(), 1, dump.size(), stderr);
    std::fflush(stderr);
    TraceRecord timed_out = op.record;
    timed_out.timed_out = true;
    timed_out.t_end_us = 0;
    timed_out.out_digest.reset();
    writer_->append(timed_out);
    const Status synced = writer_->sync();
    log_error("trace {} ({})", synced.ok() ? "flushed to " + writer_->path() : synced.message(),
              "the pending op is its last record, marked timed_out");
    if (!op_is_p2p(op.record.op) && op.members.size() > 1) {
      const std::string run_dir = std::filesystem::path(writer_->path()).parent_path().parent_path().string();
      const double grace = std::clamp(timeout_s() / 4, 1.0, 10.0);
      const std::string report =
          diagnose_stall(run_dir, op.record, op.members, op.members[static_cast<size_t>(op.record.group_rank)], grace);
      if (!report.empty()) log_error("{}", report);
    }
    log_error("terminating the job with exit code {}", kExitCode);
  } else {
    log_error("tracing is off, so there are no trace records to show; terminating the job with exit code {}",
              kExitCode);
  }
  if (!terminate_) std::_Exit(kExitCode);
  terminate_();
}

}  // namespace sp::comm
