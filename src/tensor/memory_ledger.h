// MemoryLedger: the one allocator of tensor memory, and its exact account.
// Every buffer the engine owns comes from here with a category and a name; the ledger tracks live
// and peak bytes per category, per name and in total. Because the engine knows what it allocates,
// plan/ledger_model predicts these numbers and the gate requires prediction == measurement to
// the byte (docs/formats/ledger.md). Bytes are the requested sizes (alignment padding excluded).
// Not thread-safe: one ledger per rank, used from the training thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace sp {

enum class Category : uint8_t { kParam, kGrad, kOptim, kActivation, kComm, kWorkspace, kIo };
constexpr size_t kCategoryCount = 7;
std::string_view category_name(Category c);

class MemoryLedger {
 public:
  struct Bytes {
    int64_t live = 0;
    int64_t peak = 0;
  };
  struct Entry {
    Category category = Category::kWorkspace;
    int64_t live = 0;
    int64_t peak = 0;
    int64_t allocations = 0;  // how many times a buffer of this name was allocated
  };

  MemoryLedger() = default;
  MemoryLedger(const MemoryLedger&) = delete;
  MemoryLedger& operator=(const MemoryLedger&) = delete;
  ~MemoryLedger();

  // 64-byte aligned, zero-filled. Aborts (SP_CHECK) if the system is out of memory.
  void* allocate(std::string_view name, Category category, size_t bytes);
  void release(void* p, std::string_view name, Category category, size_t bytes);

  const Bytes& total() const { return total_; }
  const Bytes& category(Category c) const { return by_category_[static_cast<size_t>(c)]; }
  const std::map<std::string, Entry, std::less<>>& entries() const { return entries_; }
  int64_t live_allocations() const { return live_allocations_; }

 private:
  Bytes total_;
  std::array<Bytes, kCategoryCount> by_category_{};
  std::map<std::string, Entry, std::less<>> entries_;
  int64_t live_allocations_ = 0;
};

}  // namespace sp
