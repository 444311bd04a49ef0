#include "kernels/reduce.h"

#include <bit>

#include "core/check.h"
#include "core/time_split.h"
#include "tensor/float16.h"

namespace sp::kernels {

int64_t canonical_split(int64_t lo, int64_t hi) {
  SP_CHECK_GE(hi - lo, 2, "a split needs at least two leaves");
  return lo + static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(hi - lo - 1)));
}

namespace {

// The per-dtype loops of add_into.
void add_f32(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void add_bf16(uint16_t* out, const uint16_t* a, const uint16_t* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_from_f32(f32_from_bf16(a[i]) + f32_from_bf16(b[i]));
}

void add_f16(uint16_t* out, const uint16_t* a, const uint16_t* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f16_from_f32(f32_from_f16(a[i]) + f32_from_f16(b[i]));
}

void tree_sum(std::span<const BufView> leaves, size_t lo, size_t hi) {
  if (hi - lo < 2) return;
  const auto mid = static_cast<size_t>(canonical_split(static_cast<int64_t>(lo), static_cast<int64_t>(hi)));
  tree_sum(leaves, lo, mid);
  tree_sum(leaves, mid, hi);
  add_into(leaves[lo], leaves[lo], leaves[mid]);
}

}  // namespace

void add_into(BufView out, ConstBufView a, ConstBufView b) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  SP_CHECK(out.count == a.count && out.count == b.count, "add_into of {}, {} and {} elements", out.count, a.count,
           b.count);
  SP_CHECK(out.dtype == a.dtype && out.dtype == b.dtype, "add_into of {}, {} and {}", dtype_name(out.dtype),
           dtype_name(a.dtype), dtype_name(b.dtype));
  switch (out.dtype) {
    case DType::kF32:
      return add_f32(out.f32(), a.f32(), b.f32(), out.count);
    case DType::kBF16:
      return add_bf16(out.float16(), a.float16(), b.float16(), out.count);
    case DType::kF16:
      return add_f16(out.float16(), a.float16(), b.float16(), out.count);
    default:
      SP_CHECK(false, "add_into of {}: not a float dtype", dtype_name(out.dtype));
  }
}

void canonical_tree_sum_inplace(std::span<const BufView> leaves) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  SP_CHECK(!leaves.empty(), "canonical sum of no leaves");
  tree_sum(leaves, 0, leaves.size());
}

void CanonicalAccumulator::merge(Node& left, const Node& right, std::vector<BufView>& freed) {
  add_into(left.data, left.data, right.data);
  left.size += right.size;
  freed.push_back(right.data);
}

std::vector<BufView> CanonicalAccumulator::push(BufView leaf) {
  SP_CHECK(leaf.dtype == dtype_ && leaf.count == n_, "push of {} {} elements into a {} accumulator of {}", leaf.count,
           dtype_name(leaf.dtype), dtype_name(dtype_), n_);
  std::vector<BufView> freed;
  stack_.push_back({leaf, 1});
  ++leaves_;
  // Merge while the two top nodes are perfect subtrees of equal size: that is the canonical tree's
  // left child (older, lower indices) + right child, exactly as in tree_sum.
  while (stack_.size() >= 2 && stack_[stack_.size() - 1].size == stack_[stack_.size() - 2].size) {
    const Node right = stack_.back();
    stack_.pop_back();
    merge(stack_.back(), right, freed);
  }
  return freed;
}

BufView CanonicalAccumulator::finish(std::vector<BufView>& freed) {
  SP_CHECK(!stack_.empty(), "finish() before any leaf was pushed");
  // The stack holds perfect subtrees of strictly decreasing power-of-two sizes; the canonical tree
  // over the whole range is left-perfect at every level, so folding from the right reproduces it.
  while (stack_.size() >= 2) {
    const Node right = stack_.back();
    stack_.pop_back();
    merge(stack_.back(), right, freed);
  }
  const BufView total = stack_.back().data;
  stack_.clear();
  leaves_ = 0;
  return total;
}

int64_t canonical_accumulator_peak_buffers(int64_t n_leaves) {
  int64_t peak = 0;
  for (int64_t j = 1; j <= n_leaves; ++j) {
    // Before merges, the stack holds popcount(j − 1) nodes plus the new leaf.
    const int64_t depth = std::popcount(static_cast<uint64_t>(j - 1)) + 1;
    peak = depth > peak ? depth : peak;
  }
  return peak;
}

}  // namespace sp::kernels
