// ExactSum: order-independent, exact accumulation of fp32 values and their squares.
//
// Every finite fp32 value is M·2^(b−150) with an integer mantissa M < 2^24 and a bin b in [1, 254].
// The accumulator keeps one integer per bin for Σ±M and one for ΣM², so adding values is integer
// addition: exact, associative and commutative. Two accumulators merge by adding bins. Hence a
// sum or sum of squares over a tensor is bit-identical however the tensor is sharded across ranks
// and in whatever order the pieces are combined: the gradient norm used for clipping and the
// statistics in checksums.jsonl do not depend on the topology (docs/equivalence.md).
// Only the final conversion to double rounds, once, in a fixed order.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sp {

class ExactSum {
 public:
  static constexpr int kBins = 256;  // bin 0 unused (subnormals go to bin 1), 255 = non-finite

  void add(const float* x, size_t n);
  void merge(const ExactSum& other);

  double sum() const;          // Σ x, rounded once
  double sum_squares() const;  // Σ x², rounded once
  double l2_norm() const;      // sqrt(sum_squares())
  float absmax() const { return absmax_; }  // over finite values
  uint64_t count() const { return count_; }
  uint64_t nonfinite_count() const { return nan_ + inf_; }
  uint64_t nan_count() const { return nan_; }
  uint64_t inf_count() const { return inf_; }
  bool finite() const { return nonfinite_count() == 0; }

  // Flat little-endian words for transport (MPI, files); from_words(to_words()) == *this.
  std::vector<uint64_t> to_words() const;
  static ExactSum from_words(std::span<const uint64_t> words);
  static constexpr size_t kWords = 3 * kBins + 4;

 private:
  std::array<int64_t, kBins> sum_{};      // Σ ±M per bin; |M| < 2^24, safe for 2^39 adds
  std::array<uint64_t, kBins> sq_lo_{};   // Σ M² per bin, low and high 64 bits of a 128-bit sum
  std::array<uint64_t, kBins> sq_hi_{};
  uint64_t count_ = 0, nan_ = 0, inf_ = 0;
  float absmax_ = 0.0f;
};

}  // namespace sp
