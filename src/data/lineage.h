// Lineage: what the pipeline decided about every document (lineage.jsonl, one record each) and the
// totals (lineage.json). Not the decisions themselves (prepare.cc makes them). Invariant: every
// document read from a corpus file has exactly one record, and the totals are sums over those
// records, so they add up: total = kept + filtered, kept = train + eval, filtered = Σ reasons.
// Format: docs/formats/lineage.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/contamination.h"
#include "data/pii.h"
#include "data/quality_filter.h"
#include "data/sources.h"

namespace sp::data {

// Why a document is not in either split. kNone = kept.
enum class DropReason {
  kNone,
  kBinary,
  kInvalidUtf8,
  kTooShort,
  kBoilerplate,
  kExactDuplicate,
  kNearDuplicate,
  kContaminated
};
const char* drop_reason_name(DropReason r);
inline constexpr DropReason kAllDropReasons[] = {
    DropReason::kBinary,         DropReason::kInvalidUtf8,   DropReason::kTooShort,    DropReason::kBoilerplate,
    DropReason::kExactDuplicate, DropReason::kNearDuplicate, DropReason::kContaminated};

// The pipeline's state for one document.
struct DocRecord {
  uint32_t source = 0;  // index into SourcesFile::sources
  int64_t index = 0;    // position in its source file
  int64_t offset = 0, bytes = 0;
  std::string id;  // "<source id>/<index, 6 digits>"
  QualityResult quality;
  std::string text;  // PII-scrubbed text (kept candidates only)
  std::vector<uint64_t> units;
  PiiCounts pii;
  DropReason drop = DropReason::kNone;
  int64_t exact_duplicate_of = -1;  // document ordinal
  int64_t cluster = -1;             // near-duplicate cluster representative (ordinal), if in a cluster ≥ 2
  int64_t cluster_size = 0;
  double cluster_jaccard = 0.0;  // Jaccard with the representative (near duplicates)
  int split = -1;                // 0 train, 1 eval, -1 none
  double split_u = 0.0;          // the split hash as a number in [0, 1)
  bool contamination_checked = false;
  NgramIndex::Overlap overlap;
  int64_t tokens = 0;  // tokens written to the shards (with the final <|endoftext|>)
};

nlohmann::ordered_json lineage_record(const DocRecord& d, const std::vector<DocRecord>& all, const SourcesFile& src,
                                      int contamination_ngram);

// Totals by source, language, filter reason, PII kind, split; `extra` (dedup, contamination,
// tokenizer, shards, identity sections) is merged in by the caller.
nlohmann::ordered_json lineage_totals(const std::vector<DocRecord>& docs, const SourcesFile& src);

}  // namespace sp::data
