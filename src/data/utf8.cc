#include "data/utf8.h"

namespace sp::data {

Utf8Char utf8_next(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1, true};
  int len;
  char32_t cp, min;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return {b0, 1, false};
  }
  if (i + static_cast<size_t>(len) > s.size()) return {b0, 1, false};
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
    if ((b & 0xC0) != 0x80) return {b0, 1, false};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {b0, 1, false};
  return {cp, len, true};
}

bool utf8_valid(std::string_view s, size_t* bad_offset) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Utf8Char c = utf8_next(s, i);
    if (!c.valid) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += static_cast<size_t>(c.len);
  }
  return true;
}

void utf8_append(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_han(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0xF900 && cp <= 0xFAFF) ||
         (cp >= 0x20000 && cp <= 0x323AF) || cp == 0x3007;
}

CharClass char_class(char32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return CharClass::kLatin;
    if (cp >= '0' && cp <= '9') return CharClass::kDigit;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CharClass::kSpace;
    return CharClass::kPunct;
  }
  if (cp < 0xC0)
    return cp == 0xA0 ? CharClass::kSpace : (cp == 0xAA || cp == 0xBA) ? CharClass::kLatin : CharClass::kPunct;
  if (cp <= 0x24F) return (cp == 0xD7 || cp == 0xF7) ? CharClass::kPunct : CharClass::kLatin;
  if (cp <= 0x36F) return CharClass::kLatin;                   // IPA, spacing modifiers, combining diacritics
  if (cp >= 0x1E00 && cp <= 0x1EFF) return CharClass::kLatin;  // Latin Extended Additional
  if (cp < 0x2000) return CharClass::kLetter;                  // Greek .. Ethiopic .. Greek Extended (approximate)
  if (cp <= 0x200A || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F) return CharClass::kSpace;
  if (cp < 0x2E80) return CharClass::kPunct;  // punctuation, symbols, arrows, box drawing, dingbats
  if (cp == 0x3000) return CharClass::kSpace;
  if (is_han(cp)) return CharClass::kHan;
  if (cp <= 0x303F) return CharClass::kPunct;                   // CJK radicals, ideographic punctuation
  if (cp <= 0x31FF) return CharClass::kLetter;                  // kana, bopomofo, Hangul compatibility jamo
  if (cp >= 0xAC00 && cp <= 0xD7AF) return CharClass::kLetter;  // Hangul syllables
  if (cp >= 0xFF10 && cp <= 0xFF19) return CharClass::kDigit;   // full-width digits
  if ((cp >= 0xFF21 && cp <= 0xFF3A) || (cp >= 0xFF41 && cp <= 0xFF5A)) return CharClass::kLatin;
  if ((cp >= 0xFE30 && cp <= 0xFE4F) || (cp >= 0xFF00 && cp <= 0xFF65) || (cp >= 0xE000 && cp <= 0xF8FF))
    return CharClass::kPunct;
  if (cp >= 0x1F000) return CharClass::kPunct;                 // emoji, symbols (Han extensions handled above)
  if (cp >= 0xA000 && cp < 0xAC00) return CharClass::kLetter;  // Yi, Vai, Latin Extended-D (approximate)
  return CharClass::kPunct;
}

ScriptCounts count_scripts(std::string_view s) {
  ScriptCounts c;
  size_t i = 0;
  while (i < s.size()) {
    const Utf8Char u = utf8_next(s, i);
    i += static_cast<size_t>(u.len);
    ++c.chars;
    if (!u.valid) {
      ++c.invalid;
      continue;
    }
    if (u.cp == 0 || u.cp == 0x7F || (u.cp < 0x20 && !(u.cp >= 0x09 && u.cp <= 0x0D))) ++c.controls;
    switch (char_class(u.cp)) {
      case CharClass::kHan:
        ++c.han;
        break;
      case CharClass::kLatin:
        ++c.latin;
        break;
      case CharClass::kLetter:
        ++c.other_letters;
        break;
      case CharClass::kDigit:
        ++c.digits;
        break;
      case CharClass::kSpace:
        ++c.spaces;
        break;
      case CharClass::kPunct:
        ++c.punct;
        break;
    }
  }
  return c;
}

ScriptGuess detect_script(const ScriptCounts& c) {
  const int64_t letters = c.han + c.latin + c.other_letters;
  if (letters == 0) return {"None", "und", 0.0, 0.0};
  const double han = static_cast<double>(c.han) / static_cast<double>(letters);
  const double latin = static_cast<double>(c.latin) / static_cast<double>(letters);
  if (han >= 0.5) return {"Han", "zh", han, latin};
  if (latin >= 0.5) return {"Latin", "en", han, latin};
  return {"Mixed", "mul", han, latin};
}

}  // namespace sp::data
