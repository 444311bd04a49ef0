// Stall diagnosis: when the watchdog fires on a collective, which member of the group stopped. Every
// live member waiting in the same op fires too and appends a "timed_out" record for it, so within a
// short grace period the members' trace files (DIR/trace/rank-N.jsonl, read from their tails) say who
// reached seq N of the group and who did not; topology.json's host and pid add, for a member on this
// host, what its process is doing (stopped by SIGSTOP or a debugger, ended, running). Not the trace
// checker (evidence/trace_check.h reads whole files afterwards) and not a recovery: the watchdog still
// ends the job. Without a shared file system a member on another host has no readable trace here; the
// report says so and what to run once the traces are collected. Reference: docs/comm.md §6.
// Invariant: never calls MPI and never blocks longer than its grace period.
#pragma once

#include <span>
#include <string>

#include "comm/trace_record.h"

namespace sp::comm {

// A report (several lines, no trailing newline) naming the member(s) of `pending`'s group that did
// not reach its seq, or saying why that cannot be told here. `run_dir` holds trace/ and
// topology.json; `members` are the group's world ranks; `self` is this process's world rank, whose
// own timed_out record is already in its trace. Polls the files for up to `grace_s` seconds.
std::string diagnose_stall(const std::string& run_dir, const TraceRecord& pending, std::span<const int> members,
                           int self, double grace_s);

// The state letter of process `pid` on this host from /proc/PID/stat ('R', 'S', 'T', 'Z', ...), or
// '\0' when there is no such process.
char process_state(long pid);

}  // namespace sp::comm
