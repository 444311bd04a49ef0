// Document quality filters, applied in this order; the first failure decides the reason:
//   binary        NUL bytes, or more than max_control_share of characters are control characters
//   invalid_utf8  not valid UTF-8 (RFC 3629); the decision records the first bad byte's offset
//   too_short     fewer than min_units units (words or Han characters, text_units.h)
//   boilerplate   at least boilerplate_line_share of the non-empty lines (and ≥ 3 lines) look like
//                 boilerplate: a legal/navigation phrase, under half letters (rules, tables,
//                 numbers), or a short heading (≤ 4 words, ≤ 40 bytes, no sentence punctuation)
// Not PII scrubbing or deduplication. Invariant: every decision taken is recorded, with the
// measured value and its threshold. docs/data.md, "Filters" says why each threshold is what it is.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "data/utf8.h"

namespace sp::data {

struct FilterOptions {
  int64_t min_units = 16;  // ≥ the contamination n-gram so every kept doc is checkable
  double boilerplate_line_share = 0.6;
  double max_control_share = 0.01;
};

enum class FilterReason { kNone, kBinary, kInvalidUtf8, kTooShort, kBoilerplate };
const char* filter_reason_name(FilterReason r);  // "binary", "invalid_utf8", "too_short", "boilerplate"

struct QualityResult {
  FilterReason reason = FilterReason::kNone;
  nlohmann::ordered_json decisions = nlohmann::ordered_json::array();  // one object per filter run
  ScriptCounts counts;
  int64_t units = 0;
};

QualityResult quality_check(std::string_view text, const FilterOptions& opt);

// True when a single line looks like boilerplate (the line rule above; exposed for tests).
bool boilerplate_line(std::string_view line);

}  // namespace sp::data
