#include "tensor/memory_ledger.h"

#include <algorithm>
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

void* MemoryLedger::allocate(std::string_view name, Category category, size_t bytes) {
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
