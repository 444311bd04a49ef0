// ColdArena: operands that come from memory, as a training step's do. A step touches each weight, gradient
// leaf and saved activation once per pass, between products of other layers, so its GEMMs read them from
// DRAM; a calibration loop that repeats one call on the same buffers reads them from the cache and prices
// the step's GEMMs short (on the AMD EPYC by 9–16 %, docs/plan.md §10). Successive calls of a probe take
// their buffers at a rolling cursor through an arena of at least twice the last-level cache, so a region is
// taken again only after the cursor has swept the cache clean. Inputs come from a read-only arena of
// finite values (filled once); outputs go to their own arena, so no product feeds a later call's input.
// Internal to planner/ (the calibration); not an engine interface.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sp::planner {

// The ranks that calibrate at once on this machine (one kernel: network-namespace "hosts" included;
// calibrate_this_host sets it): they share its memory.
inline int cold_arena_ranks_per_host = 1;

// Bytes the arenas sweep at least: twice the last-level cache the OS reports (sysconf), or 2 × 32 MiB where
// it reports none (some virtual machines), and never less than 64 MiB — but at most 1/16 of the host's memory
// per rank calibrating on it at once: a probe holds up to four arenas, so they take at most a quarter of the memory. A
// VM may report its host's whole L3 (480 MiB on a 2-vCPU Intel Xeon, 2026-12-07): 2 × that in each of four arenas
// on each of four ranks was 20 GB of a 23 GB machine, killed by the OOM killer beside another test. Where the cap
// applies the sweep is shorter than twice that reported cache, which a 2-vCPU share of it does not fill anyway.
inline int64_t cold_sweep_bytes() {
  const long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const int64_t cache = llc > 0 ? static_cast<int64_t>(llc) : (int64_t{32} << 20);
  const int64_t memory = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<int64_t>(sysconf(_SC_PAGE_SIZE));
  const int64_t cap = memory > 0 ? memory / (16 * std::max(cold_arena_ranks_per_host, 1)) : 2 * cache;
  return std::max<int64_t>(std::min(2 * cache, cap), int64_t{64} << 20);
}

template <class T>
class ColdArena {
 public:
  // `largest`: elements of the largest set one call takes; `value(i)`: the fill of element i (inputs).
  template <class Fill>
  ColdArena(int64_t largest, Fill value)
      : data_(static_cast<size_t>(std::max<int64_t>(cold_sweep_bytes() / static_cast<int64_t>(sizeof(T)), largest) +
                                  2 * kAlign)) {
    for (size_t i = 0; i < data_.size(); ++i) data_[i] = value(i);
  }
  // The next `n` elements at the cursor, 64-byte aligned as the engine's tensors are (wrapping to the start
  // when they would run past the end).
  T* take(int64_t n) {
    const int64_t size = static_cast<int64_t>(data_.size()) - kAlign;
    if (cursor_ + n > size) cursor_ = 0;
    T* p = aligned() + cursor_;
    cursor_ += (n + kAlign - 1) / kAlign * kAlign;
    return p;
  }

 private:
  static constexpr int64_t kAlign = 64 / static_cast<int64_t>(sizeof(T));  // elements per 64 bytes
  T* aligned() {
    const auto a = reinterpret_cast<uintptr_t>(data_.data());
    return data_.data() + ((64 - a % 64) % 64) / sizeof(T);
  }
  std::vector<T> data_;
  int64_t cursor_ = 0;
};

}  // namespace sp::planner
