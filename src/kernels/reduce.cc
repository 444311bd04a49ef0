#include "kernels/reduce.h"

#include <bit>

#include "core/check.h"

namespace sp::kernels {

int64_t canonical_split(int64_t lo, int64_t hi) {
  SP_CHECK_GE(hi - lo, 2, "a split needs at least two leaves");
  return lo + static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(hi - lo - 1)));
}

void add_into(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

static void tree_sum(float* const* leaves, int64_t lo, int64_t hi, int64_t n) {
  if (hi - lo < 2) return;
  const int64_t mid = canonical_split(lo, hi);
  tree_sum(leaves, lo, mid, n);
  tree_sum(leaves, mid, hi, n);
  add_into(leaves[lo], leaves[lo], leaves[mid], n);
}

void canonical_tree_sum_inplace(float* const* leaves, int64_t n_leaves, int64_t n) {
  SP_CHECK_GE(n_leaves, 1, "canonical sum of no leaves");
  tree_sum(leaves, 0, n_leaves, n);
}

std::vector<float*> CanonicalAccumulator::push(float* leaf) {
  std::vector<float*> freed;
  stack_.push_back({leaf, 1});
  ++leaves_;
  // Merge while the two top nodes are perfect subtrees of equal size: that is the canonical tree's
  // left child (older, lower indices) + right child, exactly as in tree_sum.
  while (stack_.size() >= 2 && stack_[stack_.size() - 1].size == stack_[stack_.size() - 2].size) {
    Node right = stack_.back();
    stack_.pop_back();
    Node& left = stack_.back();
    add_into(left.data, left.data, right.data, n_);
    left.size += right.size;
    freed.push_back(right.data);
  }
  return freed;
}

float* CanonicalAccumulator::finish(std::vector<float*>& freed) {
  SP_CHECK(!stack_.empty(), "finish() before any leaf was pushed");
  // The stack holds perfect subtrees of strictly decreasing power-of-two sizes; the canonical tree
  // over the whole range is left-perfect at every level, so folding from the right reproduces it.
  while (stack_.size() >= 2) {
    Node right = stack_.back();
    stack_.pop_back();
    Node& left = stack_.back();
    add_into(left.data, left.data, right.data, n_);
    left.size += right.size;
    freed.push_back(right.data);
  }
  float* total = stack_.back().data;
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
