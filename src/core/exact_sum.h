// ExactSum: order-independent, exact accumulation of fp32 values and their squares.
//
// Every finite fp32 value is M·2^(b−150) with an integer mantissa M < 2^24 and a bin b in [1, 254].
// add() keeps one integer per bin for Σ±M and one (128-bit) for ΣM², so adding values is integer
// addition: exact, associative and commutative. (With AVX-512F, long runs skip the bins: each block
// of values within 2^24 of its largest becomes fixed-point integers added straight into the limbs
// below; the same exact sums, see add_window_avx512.) For transport and merging the bins are settled into
// three fixed-point integers held as 32-bit limbs: Σ of the positive values and Σ of the magnitudes of
// the negative ones in units of 2^−149 (kSumLimbs limbs each), Σx² in units of 2^−298 (kSqLimbs
// limbs). Limb-wise integer sums of such words (an MPI SUM over ranks) are again exact, so a sum or
// sum of squares over a tensor is bit-identical however it is sharded across ranks and in whatever
// order the pieces are combined: the gradient norm used for clipping and the statistics in
// checksums.jsonl do not depend on the topology (docs/equivalence.md). Only the final conversion to
// double rounds, once (round to nearest even).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace sp {

class ExactSum {
 public:
  static constexpr int kBins = 256;     // bin 0 unused (subnormals go to bin 1), 255 = non-finite
  static constexpr int kSumLimbs = 12;  // 384 bits: |Σx| / 2^−149 < 2^24 · 2^253 · 2^(count bits)
  static constexpr int kSqLimbs = 21;   // 672 bits: Σx² / 2^−298 < 2^48 · 2^506 · 2^(count bits)

  // allow_simd = false forces the portable histogram, allow_ifma = false the AVX-512F window kernel where
  // the AVX512-IFMA one would run (tests compare the paths bit for bit).
  void add(const float* x, size_t n, bool allow_simd = true, bool allow_ifma = true);
  void merge(const ExactSum& other);
  static bool simd_available();  // add() has an AVX-512F path on this CPU
  static bool ifma_available();  // ... and its AVX512-DQ/IFMA block kernel

  double sum() const;                       // Σ x, rounded once
  double sum_squares() const;               // Σ x², rounded once
  double l2_norm() const;                   // sqrt(sum_squares())
  float absmax() const { return absmax_; }  // over finite values
  uint64_t count() const { return count_; }
  uint64_t nonfinite_count() const { return nan_ + inf_; }
  uint64_t nan_count() const { return nan_; }
  uint64_t inf_count() const { return inf_; }
  bool finite() const { return nonfinite_count() == 0; }

  // Flat words for transport: [positive limbs | negative limbs | square limbs | count nan inf absmax].
  // Every limb word is < 2^32, so word-wise integer sums over up to 2^32 accumulators do not overflow
  // and from_words() of such a sum is the merge of them all (absmax must be combined by max instead).
  std::vector<uint64_t> to_words() const;
  static ExactSum from_words(std::span<const uint64_t> words);
  static constexpr size_t kWords = 2 * kSumLimbs + kSqLimbs + 4;

 private:
  using SumLimbs = std::array<uint64_t, kSumLimbs>;
  using SqLimbs = std::array<uint64_t, kSqLimbs>;
  struct Settled {
    SumLimbs pos{}, neg{};
    SqLimbs sq{};
  };
  void add_short(const float* x, size_t n);
  void add_histogram(const float* x, size_t n);
  void add_window_avx512(const float* x, size_t n, bool allow_ifma);
  // Pass 2 of a window block (exact_sum_avx512.cc): lanes = [Σa of positive values, Σa of negative ones,
  // low and high parts of Σa²] of the values with bin ≥ base; values below it go to their bins.
  static constexpr size_t kWindowBlock = 8192;
  static constexpr int kWindow = 24;
  void window_integer(const float* x, size_t len, int base, uint64_t (&lanes)[4][8]);  // a² split at bit 48
  void window_ifma(const float* x, size_t len, int base, uint64_t (&lanes)[4][8]);     // a² split at bit 52
  void bin_one(uint32_t u);  // one finite value into its bin (no count, absmax or binned_)
  Settled settled() const;   // bins folded into the fixed-point part, limbs normalized

  std::array<int64_t, kBins> sum_{};     // Σ ±M per bin; |M| < 2^24, safe for 2^39 adds
  std::array<uint64_t, kBins> sq_lo_{};  // Σ M² per bin, low and high 64 bits of a 128-bit sum
  std::array<uint64_t, kBins> sq_hi_{};
  Settled fixed_;        // merged or received accumulators (32-bit limbs)
  bool binned_ = false;  // some value went to the bins (else settled() skips them)
  uint64_t count_ = 0, nan_ = 0, inf_ = 0;
  float absmax_ = 0.0f;
};

}  // namespace sp
