#include "kernels/reduce.h"

#include <bit>

#include "core/check.h"
#include "tensor/float16.h"

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

void add_into16(uint16_t* out, const uint16_t* a, const uint16_t* b, int64_t n, DType t) {
  SP_CHECK(is_float16(t), "add_into16 of {}", dtype_name(t));
  if (t == DType::kBF16)
    for (int64_t i = 0; i < n; ++i) out[i] = bf16_from_f32(f32_from_bf16(a[i]) + f32_from_bf16(b[i]));
  else
    for (int64_t i = 0; i < n; ++i) out[i] = f16_from_f32(f32_from_f16(a[i]) + f32_from_f16(b[i]));
}

static void tree_sum16(uint16_t* const* leaves, int64_t lo, int64_t hi, int64_t n, DType t) {
  if (hi - lo < 2) return;
  const int64_t mid = canonical_split(lo, hi);
  tree_sum16(leaves, lo, mid, n, t);
  tree_sum16(leaves, mid, hi, n, t);
  add_into16(leaves[lo], leaves[lo], leaves[mid], n, t);
}

void canonical_tree_sum_inplace16(uint16_t* const* leaves, int64_t n_leaves, int64_t n, DType t) {
  SP_CHECK_GE(n_leaves, 1, "canonical sum of no leaves");
  tree_sum16(leaves, 0, n_leaves, n, t);
}

void CanonicalAccumulator::merge(void* left, const void* right) {
  if (dtype_ == DType::kF32)
    add_into(static_cast<float*>(left), static_cast<float*>(left), static_cast<const float*>(right), n_);
  else
    add_into16(static_cast<uint16_t*>(left), static_cast<uint16_t*>(left), static_cast<const uint16_t*>(right), n_,
               dtype_);
}

std::vector<float*> CanonicalAccumulator::push(float* leaf) {
  SP_CHECK(dtype_ == DType::kF32, "push() of fp32 into a {} accumulator", dtype_name(dtype_));
  std::vector<float*> out;
  for (void* f : push_node(leaf)) out.push_back(static_cast<float*>(f));
  return out;
}

float* CanonicalAccumulator::finish(std::vector<float*>& freed) {
  SP_CHECK(dtype_ == DType::kF32, "finish() of a {} accumulator", dtype_name(dtype_));
  std::vector<void*> f;
  void* total = finish_node(f);
  for (void* x : f) freed.push_back(static_cast<float*>(x));
  return static_cast<float*>(total);
}

std::vector<uint16_t*> CanonicalAccumulator::push16(uint16_t* leaf) {
  SP_CHECK(is_float16(dtype_), "push16() into a {} accumulator", dtype_name(dtype_));
  std::vector<uint16_t*> out;
  for (void* f : push_node(leaf)) out.push_back(static_cast<uint16_t*>(f));
  return out;
}

uint16_t* CanonicalAccumulator::finish16(std::vector<uint16_t*>& freed) {
  SP_CHECK(is_float16(dtype_), "finish16() of a {} accumulator", dtype_name(dtype_));
  std::vector<void*> f;
  void* total = finish_node(f);
  for (void* x : f) freed.push_back(static_cast<uint16_t*>(x));
  return static_cast<uint16_t*>(total);
}

std::vector<void*> CanonicalAccumulator::push_node(void* leaf) {
  std::vector<void*> freed;
  stack_.push_back({leaf, 1});
  ++leaves_;
  // Merge while the two top nodes are perfect subtrees of equal size: that is the canonical tree's
  // left child (older, lower indices) + right child, exactly as in tree_sum.
  while (stack_.size() >= 2 && stack_[stack_.size() - 1].size == stack_[stack_.size() - 2].size) {
    Node right = stack_.back();
    stack_.pop_back();
    Node& left = stack_.back();
    merge(left.data, right.data);
    left.size += right.size;
    freed.push_back(right.data);
  }
  return freed;
}

void* CanonicalAccumulator::finish_node(std::vector<void*>& freed) {
  SP_CHECK(!stack_.empty(), "finish() before any leaf was pushed");
  // The stack holds perfect subtrees of strictly decreasing power-of-two sizes; the canonical tree
  // over the whole range is left-perfect at every level, so folding from the right reproduces it.
  while (stack_.size() >= 2) {
    Node right = stack_.back();
    stack_.pop_back();
    Node& left = stack_.back();
    merge(left.data, right.data);
    left.size += right.size;
    freed.push_back(right.data);
  }
  void* total = stack_.back().data;
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
