#include "data/text_units.h"

#include "core/hash.h"
#include "data/utf8.h"

namespace sp::data {

std::string normalize_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  size_t i = 0;
  while (i < text.size()) {
    const Utf8Char c = utf8_next(text, i);
    const size_t len = static_cast<size_t>(c.len);
    if (c.valid && char_class(c.cp) == CharClass::kSpace) {
      pending_space = !out.empty();
    } else {
      if (pending_space) out += ' ';
      pending_space = false;
      if (len == 1) {
        const char b = text[i];
        out += (b >= 'A' && b <= 'Z') ? static_cast<char>(b + 32) : b;
      } else {
        out.append(text.substr(i, len));
      }
    }
    i += len;
  }
  return out;
}

std::vector<uint64_t> text_units(std::string_view text) {
  std::vector<uint64_t> units;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) units.push_back(xxh3_64(word));
    word.clear();
  };
  size_t i = 0;
  while (i < text.size()) {
    const Utf8Char c = utf8_next(text, i);
    const size_t len = static_cast<size_t>(c.len);
    const CharClass cls = c.valid ? char_class(c.cp) : CharClass::kPunct;
    if (cls == CharClass::kHan) {
      flush();
      units.push_back(xxh3_64(text.substr(i, len)));
    } else if (cls == CharClass::kLatin || cls == CharClass::kLetter || cls == CharClass::kDigit) {
      if (len == 1) {
        const char b = text[i];
        word += (b >= 'A' && b <= 'Z') ? static_cast<char>(b + 32) : b;
      } else {
        word.append(text.substr(i, len));
      }
    } else {
      flush();
    }
    i += len;
  }
  flush();
  return units;
}

std::vector<uint64_t> unit_ngrams(const std::vector<uint64_t>& units, int n) {
  std::vector<uint64_t> out;
  if (n <= 0 || units.size() < static_cast<size_t>(n)) return out;
  out.reserve(units.size() - static_cast<size_t>(n) + 1);
  for (size_t i = 0; i + static_cast<size_t>(n) <= units.size(); ++i)
    out.push_back(xxh3_64(units.data() + i, static_cast<size_t>(n) * sizeof(uint64_t), 0x6e6772616dull));
  return out;
}

}  // namespace sp::data
