// UTF-8 decoding and coarse Unicode character classes for the data pipeline.
// Not a Unicode library: classes come from code-point blocks (docs/data.md, "Character classes"),
// which is exact for ASCII, Latin, CJK and their punctuation and approximate elsewhere.
// Invariant: decoding never reads past the end of the view; an invalid or truncated sequence
// yields one invalid byte (len 1), so any byte string decodes into a sequence covering every byte.
// Reference: RFC 3629 (strict UTF-8: no overlongs, no surrogates, nothing above U+10FFFF).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sp::data {

struct Utf8Char {
  char32_t cp = 0;  // the code point; the byte value itself when !valid
  int len = 1;      // bytes consumed (1..4)
  bool valid = true;
};

// Decodes the character starting at s[i] (i < s.size()).
Utf8Char utf8_next(std::string_view s, size_t i);

// True when `s` is valid UTF-8; otherwise `*bad_offset` (if given) is the first invalid byte.
bool utf8_valid(std::string_view s, size_t* bad_offset = nullptr);

// Appends the UTF-8 encoding of `cp` (a valid scalar value) to `out`.
void utf8_append(char32_t cp, std::string& out);

enum class CharClass : uint8_t {
  kLatin,   // ASCII letters, Latin-1 and Latin Extended letters, combining marks
  kLetter,  // other alphabetic scripts: Greek, Cyrillic, kana, Hangul, ...
  kHan,     // CJK unified ideographs (all extensions) and compatibility ideographs
  kDigit,   // ASCII and full-width digits
  kSpace,   // ASCII white space, NBSP, U+2000..U+200A, U+2028/9, U+3000
  kPunct,   // everything else: punctuation, symbols, emoji, controls
};

bool is_han(char32_t cp);
CharClass char_class(char32_t cp);
inline bool is_letter_class(CharClass c) {
  return c == CharClass::kLatin || c == CharClass::kLetter || c == CharClass::kHan;
}

// Per-script character counts of a (valid or invalid) UTF-8 text.
struct ScriptCounts {
  int64_t chars = 0;  // decoded characters, invalid bytes included
  int64_t han = 0;
  int64_t latin = 0;
  int64_t other_letters = 0;
  int64_t digits = 0;
  int64_t spaces = 0;
  int64_t punct = 0;
  int64_t invalid = 0;   // invalid bytes
  int64_t controls = 0;  // C0 controls other than \t \n \r \f \v, DEL, and NUL
};
ScriptCounts count_scripts(std::string_view s);

// Detected script and language of a document: "Han"/"zh" when Han characters are at least half of
// the letters, "Latin"/"en" when Latin letters are, "Mixed"/"mul" when neither reaches half,
// "None"/"und" without letters. The bundled corpus has only English in Latin script, so Latin maps
// to "en"; a corpus with other Latin-script languages needs a real language identifier.
struct ScriptGuess {
  const char* script;
  const char* language;
  double han_share;    // han / letters
  double latin_share;  // latin / letters
};
ScriptGuess detect_script(const ScriptCounts& c);

}  // namespace sp::data
