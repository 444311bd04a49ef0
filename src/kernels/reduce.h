// The canonical reduction order (docs/equivalence.md). Gradient contributions are summed over a
// fixed binary tree on their index 0..n−1: a range [lo, hi) with more than one leaf splits at
// lo + bit_floor(hi − lo − 1), i.e. a perfect left subtree of power-of-two size and the rest on
// the right. For n = 6: ((x0+x1)+(x2+x3)) + (x4+x5). Every aligned block of power-of-two size k
// is a subtree, and the tree over n·k leaves restricted above level log2(k) is the tree over n
// leaves. So a rank that owns micro-batches [r·k, (r+1)·k) sums them into exactly the node the
// single-device run computes, and combining the dp node values over the same tree (with leaves
// in dp-rank order) reproduces the single-device sum bit for bit. Elementwise: each element i is
// reduced independently, so vector width never changes the result.
// Every function takes typed views (tensor/buf_view.h) and picks its loop from their dtype: fp32, or a
// 16-bit float (mixed precision's train.grad_dtype), where every node's sum is computed in fp32 from the
// widened children and rounded once to the 16-bit format (nearest even), so the value of a node depends
// only on its subtree: the same bits for any split over ranks.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tensor/buf_view.h"

namespace sp::kernels {

// Where range [lo, hi) (hi − lo ≥ 2) splits.
int64_t canonical_split(int64_t lo, int64_t hi);

// In place: leaves[0] := canonical sum of leaves[0..n) elementwise. Every leaf has the same count and
// dtype (F32, BF16 or F16); other leaves are clobbered (used as partial-sum storage). At least one leaf.
void canonical_tree_sum_inplace(std::span<const BufView> leaves);

// out[i] = a[i] + b[i], all three of one dtype and count: fp32 adds in fp32; BF16/F16 widen both,
// add in fp32 and round once (out[i] = round(widen(a[i]) + widen(b[i]))). out may alias a.
void add_into(BufView out, ConstBufView a, ConstBufView b);

// Streams leaves in index order and keeps the canonical partial sums on a stack, like a binary
// counter: after pushing leaf j, equal-sized perfect subtrees are merged (left + right). At most
// popcount-many partials are live; for a block of k = 2^a leaves at most a + 1. finish() folds the
// stack from the right, which is the canonical tree for any leaf count. The caller owns the
// buffers: push() takes a filled buffer and returns one that the caller may reuse.
class CanonicalAccumulator {
 public:
  // n elements of `dtype` (kF32, kBF16 or kF16) per leaf; every merge adds with add_into.
  explicit CanonicalAccumulator(int64_t n, DType dtype = DType::kF32) : n_(n), dtype_(dtype) {}
  // Takes ownership of `leaf` (n elements of dtype) as the next leaf. Returns buffers freed by merges,
  // which the caller may reuse for later leaves.
  std::vector<BufView> push(BufView leaf);
  // Folds the stack; returns the buffer holding the total and appends freed buffers to `freed`.
  BufView finish(std::vector<BufView>& freed);
  int64_t depth() const { return static_cast<int64_t>(stack_.size()); }
  int64_t leaves() const { return leaves_; }
  DType dtype() const { return dtype_; }

 private:
  struct Node {
    BufView data;
    int64_t size;  // leaves under this node
  };
  void merge(Node& left, const Node& right, std::vector<BufView>& freed);  // left := left + right
  int64_t n_;
  DType dtype_;
  int64_t leaves_ = 0;
  std::vector<Node> stack_;
};

// How many partial-sum buffers are live at most while streaming `n_leaves` leaves (the stack depth
// right after a push, before merges, maximized over the stream). Used by the ledger model.
int64_t canonical_accumulator_peak_buffers(int64_t n_leaves);

}  // namespace sp::kernels
