// Monotonic time for step timing, trace timestamps and the watchdog.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>

namespace sp {

// Nanoseconds on the steady clock (comparable within one host).
inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
// Wall-clock microseconds since the Unix epoch (comparable across hosts, for traces).
inline int64_t wall_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// CPU time of the calling thread in nanoseconds (CLOCK_THREAD_CPUTIME_ID): excludes the time the thread was
// descheduled, so a kernel timed by it on a busy machine reads what it costs when it has the core.
inline int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Seconds of the calling thread's CPU time since construction (thread_cpu_ns).
class ThreadCpuStopwatch {
 public:
  ThreadCpuStopwatch() : start_(thread_cpu_ns()) {}
  double seconds() const { return static_cast<double>(thread_cpu_ns() - start_) * 1e-9; }

 private:
  int64_t start_;
};

class Stopwatch {
 public:
  Stopwatch() : start_(now_ns()) {}
  void reset() { start_ = now_ns(); }
  double seconds() const { return static_cast<double>(now_ns() - start_) * 1e-9; }
  int64_t nanoseconds() const { return now_ns() - start_; }

 private:
  int64_t start_;
};

}  // namespace sp
