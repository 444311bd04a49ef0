// Eval-contamination check: an eval document is contaminated when any of its n-grams of units
// (13 by default: words for Latin text, characters for Han; text_units.h) also occurs in a train
// document — the rule of GPT-3 (Brown et al. 2020, appendix C). Not deduplication: it compares
// across the split, after it. Invariant: the index is a sorted vector of n-gram hashes, so the
// answer does not depend on insertion order. docs/data.md, "Contamination".
#pragma once

#include <cstdint>
#include <vector>

namespace sp::data {

class NgramIndex {
 public:
  explicit NgramIndex(int n) : n_(n) {}
  int n() const { return n_; }
  void add(const std::vector<uint64_t>& units);  // every n-gram of one train document
  void finalize();                               // sort + unique; call once after the last add
  int64_t size() const { return static_cast<int64_t>(grams_.size()); }

  struct Overlap {
    int64_t ngrams = 0;       // n-grams in the query document
    int64_t overlapping = 0;  // of those, present in the index
  };
  Overlap overlap(const std::vector<uint64_t>& units) const;

 private:
  int n_;
  bool finalized_ = false;
  std::vector<uint64_t> grams_;
};

}  // namespace sp::data
