#include "tensor/memory_ledger.h"

#include <malloc.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "core/check.h"

namespace sp {

std::string_view category_name(Category c) {
  static constexpr std::array<std::string_view, kCategoryCount> kNames = {"param", "grad",      "optim", "activation",
                                                                          "comm",  "workspace", "io"};
  return kNames[static_cast<size_t>(c)];
}

MemoryLedger::~MemoryLedger() {
  // A live allocation here means a Tensor outlived its ledger: its destructor would write freed memory.
  SP_CHECK_EQ(live_allocations_, 0, "tensors still alive when their MemoryLedger is destroyed");
}

namespace {

// Freed tensor memory stays in the process for the next allocation instead of going back to the kernel.
// glibc serves a block above its mmap threshold (at most 32 MiB) with its own mmap and unmaps it on free,
// so a buffer that a step allocates and frees (a micro-batch's fp32 leaf under 16-bit gradients,
// activation slots; until 2026-12-06 also their "grad.widened") comes back as fresh pages, each faulted in and cleared
// by the kernel before our memset: with 16-bit gradients that was a third of a small-preset step's CPU
// (docs/performance.md §"Freed memory is kept"). With mmap off and no trimming, every block comes from the heap and a
// freed one is reused, as a caching allocator does; the ledger still counts live bytes (what it predicts), and the
// process's resident memory stays at its high-water mark, the ledger's peak plus fragmentation.
void keep_freed_memory() {
  static const bool once = [] {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, INT_MAX);
    return true;
  }();
  (void)once;
}

}  // namespace

void* MemoryLedger::allocate(std::string_view name, Category category, size_t bytes) {
  keep_freed_memory();
  const size_t padded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  void* p = std::aligned_alloc(64, padded);
  SP_CHECK(p != nullptr, "out of memory allocating {} bytes for '{}'", bytes, name);
  std::memset(p, 0, padded);
  const auto b = static_cast<int64_t>(bytes);
  auto bump = [b](Bytes& x) {
    x.live += b;
    x.peak = std::max(x.peak, x.live);
  };
  bump(total_);
  bump(by_category_[static_cast<size_t>(category)]);
  auto it = entries_.find(name);
  if (it == entries_.end()) it = entries_.emplace(std::string(name), Entry{category}).first;
  SP_CHECK(it->second.category == category, "tensor '{}' allocated as {} and as {}", name,
           category_name(it->second.category), category_name(category));
  it->second.live += b;
  it->second.peak = std::max(it->second.peak, it->second.live);
  ++it->second.allocations;
  ++live_allocations_;
  return p;
}

void MemoryLedger::release(void* p, std::string_view name, Category category, size_t bytes) {
  if (p == nullptr) return;
  std::free(p);
  const auto b = static_cast<int64_t>(bytes);
  total_.live -= b;
  by_category_[static_cast<size_t>(category)].live -= b;
  auto it = entries_.find(name);
  SP_CHECK(it != entries_.end(), "release of unknown tensor '{}'", name);
  it->second.live -= b;
  --live_allocations_;
}

}  // namespace sp
