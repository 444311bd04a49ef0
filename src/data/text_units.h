// Text normalization and "units" shared by the exact-duplicate hash, the split hash, MinHash
// shingles and the contamination n-grams. Not tokenization: units are a language-aware notion of
// a word: a run of letters/digits (Latin or other alphabetic scripts, ASCII lower-cased) or ONE
// Han character (Chinese has no spaces, so characters are its words).
// Invariant: pure functions of the text bytes (no locale, no hashing seed beyond the fixed one).
// docs/data.md, "Normalization and units".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sp::data {

// ASCII lower-cased, every white-space run turned into one ' ', leading/trailing space removed.
std::string normalize_text(std::string_view text);

// 64-bit hashes of the units of `text`, in order.
std::vector<uint64_t> text_units(std::string_view text);

// Hashes of every window of n consecutive units (size − n + 1 of them; none when size < n).
std::vector<uint64_t> unit_ngrams(const std::vector<uint64_t>& units, int n);

}  // namespace sp::data
