#include "data/contamination.h"

#include <algorithm>

#include "core/check.h"
#include "data/text_units.h"

namespace sp::data {

void NgramIndex::add(const std::vector<uint64_t>& units) {
  SP_CHECK(!finalized_, "NgramIndex::add after finalize");
  const std::vector<uint64_t> g = unit_ngrams(units, n_);
  grams_.insert(grams_.end(), g.begin(), g.end());
}

void NgramIndex::finalize() {
  std::sort(grams_.begin(), grams_.end());
  grams_.erase(std::unique(grams_.begin(), grams_.end()), grams_.end());
  finalized_ = true;
}

NgramIndex::Overlap NgramIndex::overlap(const std::vector<uint64_t>& units) const {
  SP_CHECK(finalized_, "NgramIndex::overlap before finalize");
  Overlap o;
  for (uint64_t g : unit_ngrams(units, n_)) {
    ++o.ngrams;
    if (std::binary_search(grams_.begin(), grams_.end(), g)) ++o.overlapping;
  }
  return o;
}

}  // namespace sp::data
