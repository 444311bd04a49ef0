// Short-lived worker threads for I/O-bound bulk work (checkpoint hashing and loading): how many CPUs
// this process may use, and a loop that spreads independent items over that many threads.
// Not a pool and not for the training step (kernels run single-threaded per rank, by design).
// Invariant: run_indexed calls work(i) exactly once for every i in [0, n); the results it produces
// must not depend on which thread ran which item.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace sp {

// CPUs in this process's affinity mask (under mpirun with binding, the rank's cores), at least 1.
int usable_cpus();

// work(i) for every i in [0, n), on min(threads, n) threads of which the caller is one.
template <typename Work>
void run_indexed(size_t n, int threads, Work&& work) {
  std::atomic<size_t> next{0};
  auto loop = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) work(i);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < std::min<size_t>(static_cast<size_t>(std::max(threads, 1)), n); ++t) pool.emplace_back(loop);
  loop();
  for (std::thread& t : pool) t.join();
}

}  // namespace sp
