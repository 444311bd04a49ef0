// TensorSummary: the checksum of a logical tensor that does not depend on how it is sharded.
//
// digest: two 64-bit lanes, each Σ_j mix(j, bits(x_j)) mod 2^64 over the logical elements j, where
// mix is a 64-bit finalizer (murmur3 fmix64) of the logical index and the fp32 bit pattern. Integer
// addition is exact and order-free, so the digest of a tensor assembled from any shards (ZeRO flat
// ranges, TP row or column slices, pipeline stages) equals the digest computed on one device, and
// summaries of shards merge by adding lanes. A change of any element changes each lane unless two
// 64-bit mixes collide (probability ~2^-64 per lane). It is not a cryptographic commitment.
// Statistics (Σx, Σx², absmax, non-finite counts) come from ExactSum: exact, hence also order-free.
// Each logical element must be contributed by exactly one rank; `count` proves it (== numel).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "core/exact_sum.h"
#include "core/hash.h"
#include "model/weights.h"

namespace sp::evidence {

struct TensorSummary {
  uint64_t lane0 = 0;
  uint64_t lane1 = 0;
  ExactSum stats;

  // Adds elements x[0..n) whose logical indices are first_logical_index + k for k in [0, n).
  // digest = false accumulates the statistics only and leaves the lanes alone (a gradient norm for
  // clipping, when no checksum record is due).
  void add_contiguous(const float* x, int64_t n, int64_t first_logical_index, bool digest = true);
  // Adds local elements [k0, k1) of a tensor shard; x points at local element k0 (logical indices via
  // the slot's slice).
  void add_shard(const float* x, const model::TensorSlot& slot, int64_t k0, int64_t k1, bool digest = true);
  // The same for local elements [k0, k0 + x.count) held in a view of any float dtype: a 16-bit one (BF16,
  // F16) is widened exactly, block by block into a buffer on the stack, so the summary is that of its fp32
  // widening bit for bit (both the statistics and the lanes are order-free sums) without an fp32 copy.
  void add_shard(ConstBufView x, const model::TensorSlot& slot, int64_t k0, bool digest = true);
  void merge(const TensorSummary& other);

  Digest128 digest() const { return {lane0, lane1}; }
  nlohmann::json to_json() const;  // {"digest","l2","sum","absmax","finite","count"}

  // Transport for an all-reduce with integer SUM (lanes wrap mod 2^64 as the digest does; the exact
  // sums travel as ExactSum's 32-bit limbs, which cannot overflow over ranks) plus a separate MAX
  // word for absmax. to_sum_words/from_words are exact inverses under summation.
  static constexpr size_t kSumWords = 2 + ExactSum::kWords - 1;
  void to_sum_words(std::span<uint64_t> out) const;  // out.size() == kSumWords
  uint64_t max_word() const;                         // absmax bit pattern (non-negative float: orders as uint)
  static TensorSummary from_words(std::span<const uint64_t> sum_words, uint64_t max_word);
};

// The mixing function, exposed for tests and for independent re-implementation (docs/formats/checksums.md).
uint64_t summary_mix(uint64_t logical_index, uint32_t bits, uint64_t lane);
// a += Σ_k summary_mix(first + k, bits(x[k]), 0) and b likewise for lane 1, mod 2^64. Uses AVX-512DQ
// when the CPU has it (same bits: the sums are modular) unless allow_simd is false; exposed so that
// tests compare both paths.
void mix_lanes(const float* x, int64_t n, int64_t first, uint64_t& a, uint64_t& b, bool allow_simd = true);
bool mix_lanes_simd_available();

}  // namespace sp::evidence
