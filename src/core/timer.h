// Monotonic time for step timing, trace timestamps and the watchdog.
#pragma once

#include <chrono>
#include <cstdint>

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
