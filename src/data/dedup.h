// Near-duplicate detection: MinHash signatures over shingles (k consecutive units: words for
// Latin text, single characters for Han), LSH banding to find candidate pairs, and an EXACT
// Jaccard check of every candidate against the threshold, then union-find clusters.
// Not exact deduplication (a hash of normalize_text(), done by the pipeline before this).
// Invariant: clusters depend only on the shingle sets and the options (ties: the lowest document
// index represents its cluster), never on hash-map iteration order.
// Reference: Broder 1997 (MinHash); Leskovec, Rajaraman & Ullman, "Mining of Massive Datasets"
// §3.4 (banding: P(candidate | Jaccard s) = 1 − (1 − s^r)^b). docs/data.md, "Near duplicates".
#pragma once

#include <cstdint>
#include <vector>

namespace sp::data {

struct MinHashOptions {
  int shingle = 5;         // units per shingle
  int bands = 20;          // b
  int rows = 6;            // r; b·r = 120 hash functions
  double threshold = 0.8;  // Jaccard at or above which two documents are near duplicates
  uint64_t seed = 0x5eed;  // hash family seed
};

// Sorted, unique shingle hashes of a unit sequence; a sequence shorter than k is one shingle.
std::vector<uint64_t> shingle_set(const std::vector<uint64_t>& units, int k);

// (b·r) minimum hash values; h_i(x) = splitmix64(x ⊕ seed_i).
std::vector<uint64_t> minhash_signature(const std::vector<uint64_t>& shingles, int num_hashes, uint64_t seed);

// |A ∩ B| / |A ∪ B| of two sorted unique sets (1 for two empty sets).
double jaccard(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);

// 1 − (1 − s^r)^b: the probability that LSH proposes a pair of Jaccard similarity s.
double lsh_candidate_probability(double s, int bands, int rows);

struct NearDupResult {
  std::vector<int64_t> representative;  // per document: the lowest index in its cluster
  int64_t candidate_pairs = 0;          // distinct pairs proposed by LSH
  int64_t similar_pairs = 0;            // of those, exact Jaccard ≥ threshold
  int64_t clusters = 0;                 // clusters with two or more documents
};

NearDupResult near_duplicates(const std::vector<std::vector<uint64_t>>& shingle_sets, const MinHashOptions& opt);

}  // namespace sp::data
