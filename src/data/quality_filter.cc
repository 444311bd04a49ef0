#include "data/quality_filter.h"

#include <array>
#include <string>

#include "data/text_units.h"

namespace sp::data {
namespace {

constexpr std::array<std::string_view, 12> kBoilerplatePhrases = {
    "all rights reserved", "copyright (c)", "copyright \xC2\xA9", "table of contents", "permission is hereby granted",
    "licensed under",      "terms of use",  "privacy policy",     "click here",        "unsubscribe",
    "powered by",          "cookie policy"};

bool sentence_punct(char32_t cp) {
  switch (cp) {
    case '.':
    case ',':
    case ';':
    case ':':
    case '!':
    case '?':
    case 0x3002:
    case 0xFF0C:
    case 0xFF1B:
    case 0xFF1A:
    case 0xFF01:
    case 0xFF1F:
    case 0x3001:
      return true;
    default:
      return false;
  }
}

double share(int64_t num, int64_t den) { return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den); }

}  // namespace

const char* filter_reason_name(FilterReason r) {
  switch (r) {
    case FilterReason::kNone:
      return "none";
    case FilterReason::kBinary:
      return "binary";
    case FilterReason::kInvalidUtf8:
      return "invalid_utf8";
    case FilterReason::kTooShort:
      return "too_short";
    case FilterReason::kBoilerplate:
      return "boilerplate";
  }
  return "unknown";
}

bool boilerplate_line(std::string_view line) {
  std::string lower;
  lower.reserve(line.size());
  for (char c : line) lower += (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
  for (std::string_view p : kBoilerplatePhrases)
    if (lower.find(p) != std::string::npos) return true;
  int64_t letters = 0, nonspace = 0, words = 0;
  bool in_word = false, punct = false;
  size_t i = 0;
  while (i < line.size()) {
    const Utf8Char c = utf8_next(line, i);
    i += static_cast<size_t>(c.len);
    const CharClass cls = c.valid ? char_class(c.cp) : CharClass::kPunct;
    if (cls == CharClass::kSpace) {
      in_word = false;
      continue;
    }
    ++nonspace;
    if (!in_word) ++words;
    in_word = true;
    if (is_letter_class(cls)) ++letters;
    if (c.valid && sentence_punct(c.cp)) punct = true;
  }
  if (nonspace == 0) return false;
  if (share(letters, nonspace) < 0.5) return true;
  return words <= 4 && line.size() <= 40 && !punct;
}

QualityResult quality_check(std::string_view text, const FilterOptions& opt) {
  QualityResult r;
  r.counts = count_scripts(text);
  const ScriptCounts& c = r.counts;

  const bool has_nul = text.find('\0') != std::string_view::npos;
  const double control = share(c.controls, c.chars);
  const bool binary = has_nul || control > opt.max_control_share;
  r.decisions.push_back({{"filter", "binary"},
                         {"pass", !binary},
                         {"nul", has_nul},
                         {"control_share", control},
                         {"max", opt.max_control_share}});
  if (binary) {
    r.reason = FilterReason::kBinary;
    return r;
  }

  size_t bad = 0;
  const bool valid = utf8_valid(text, &bad);
  nlohmann::ordered_json d = {{"filter", "utf8"}, {"pass", valid}};
  if (!valid) d["first_invalid_byte"] = bad;
  r.decisions.push_back(d);
  if (!valid) {
    r.reason = FilterReason::kInvalidUtf8;
    return r;
  }

  r.units = static_cast<int64_t>(text_units(text).size());
  const bool long_enough = r.units >= opt.min_units;
  r.decisions.push_back({{"filter", "length"}, {"pass", long_enough}, {"units", r.units}, {"min", opt.min_units}});
  if (!long_enough) {
    r.reason = FilterReason::kTooShort;
    return r;
  }

  int64_t lines = 0, bp = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    if (line.find_first_not_of(" \t\r\f\v") != std::string_view::npos) {
      ++lines;
      if (boilerplate_line(line)) ++bp;
    }
    start = end + 1;
  }
  const double bp_share = share(bp, lines);
  const bool boiler = lines >= 3 && bp_share >= opt.boilerplate_line_share;
  r.decisions.push_back({{"filter", "boilerplate"},
                         {"pass", !boiler},
                         {"lines", lines},
                         {"boilerplate_lines", bp},
                         {"share", bp_share},
                         {"max", opt.boilerplate_line_share}});
  if (boiler) r.reason = FilterReason::kBoilerplate;
  return r;
}

}  // namespace sp::data
