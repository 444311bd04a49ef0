// Where a rank's step time goes: this thread's steady-clock nanoseconds by kind (GEMMs, attention, the
// other memory-bound kernels, communication, waiting, optimizer, evidence), added by scopes at the
// kernels' entry points, in the traced communicator and around the step's phases. Not a profiler of
// every call: no record per call, no allocation, no I/O; two clock reads per scope into a fixed array.
// The reader (Engine::step) takes the difference over one step; what no scope covers is "other", the
// remainder of the step's wall time (docs/formats/timeline.md, docs/performance.md §"Where the time goes").
// Invariant: time is counted once. A scope counts its own time minus that of the scopes that ran inside
// it, so the kinds never overlap and their sum never exceeds the wall time around them. An owning scope
// (OwnerTimeScope: a kernel, the optimizer or evidence phase) inside another owning scope counts nothing
// and leaves its time to the outer one: attention's own products are attention, the casts of the
// optimizer's parameter copy are the optimizer's. A TimeScope (communication, waiting, a trace digest)
// always counts its own time, wherever it runs. Kernels run on the rank's one thread (core/threads.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/timer.h"

namespace sp {

enum class TimeKind : uint8_t { kGemm, kAttention, kMemoryBound, kComm, kWait, kOptimizer, kEvidence };
inline constexpr size_t kTimeKinds = 7;
// The kinds' names in enum order, as timeline/ and metrics.jsonl write them; kOtherTime is the remainder.
inline constexpr std::array<std::string_view, kTimeKinds> kTimeKindNames = {"gemm", "attention", "memory_bound", "comm",
                                                                            "wait", "optimizer", "evidence"};
inline constexpr std::string_view kOtherTime = "other";

struct TimeSplit {
  std::array<int64_t, kTimeKinds> ns{};
  int64_t& operator[](TimeKind k) { return ns[static_cast<size_t>(k)]; }
  int64_t operator[](TimeKind k) const { return ns[static_cast<size_t>(k)]; }
  int64_t sum() const {
    int64_t s = 0;
    for (int64_t v : ns) s += v;
    return s;
  }
  // The time spent between two readings of the same thread's totals.
  friend TimeSplit operator-(TimeSplit a, const TimeSplit& b) {
    for (size_t i = 0; i < kTimeKinds; ++i) a.ns[i] -= b.ns[i];
    return a;
  }
};

namespace time_detail {
struct ThreadTimes {
  TimeSplit totals;
  int64_t* children = nullptr;  // the innermost open scope's sum of its nested scopes' wall time
  int owners = 0;               // owning scopes open
};
inline thread_local ThreadTimes thread_times;
}  // namespace time_detail

// This thread's totals since it started; a reader takes the difference over its interval.
inline const TimeSplit& thread_time_split() { return time_detail::thread_times.totals; }

// Counts its scope's self time as `kind`: communication, waiting, a trace digest.
class TimeScope {
 public:
  explicit TimeScope(TimeKind kind) noexcept
      : kind_(kind), parent_children_(time_detail::thread_times.children), start_(now_ns()) {
    time_detail::thread_times.children = &children_;
  }
  ~TimeScope() {
    const int64_t elapsed = now_ns() - start_;
    time_detail::ThreadTimes& t = time_detail::thread_times;
    t.totals[kind_] += elapsed - children_;
    if (parent_children_ != nullptr) *parent_children_ += elapsed;
    t.children = parent_children_;
  }
  TimeScope(const TimeScope&) = delete;
  TimeScope& operator=(const TimeScope&) = delete;

 private:
  TimeKind kind_;
  int64_t* parent_children_;
  int64_t children_ = 0;
  int64_t start_;
};

// A TimeScope when no owning scope is open, else nothing (the outer owner keeps the time): a kernel's
// entry point, the optimizer and evidence phases of a step.
class OwnerTimeScope {
 public:
  explicit OwnerTimeScope(TimeKind kind) noexcept {
    if (time_detail::thread_times.owners++ == 0) scope_.emplace(kind);
  }
  ~OwnerTimeScope() {
    scope_.reset();
    --time_detail::thread_times.owners;
  }
  OwnerTimeScope(const OwnerTimeScope&) = delete;
  OwnerTimeScope& operator=(const OwnerTimeScope&) = delete;

 private:
  std::optional<TimeScope> scope_;
};

}  // namespace sp
