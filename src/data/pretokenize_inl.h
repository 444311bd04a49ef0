// Inline body of pretokenize_each (included from pretokenize.h only): the scanner runs once per
// byte of every encoded text, so it is a template the compiler can inline into the BPE loop.
#pragma once

#include "data/utf8.h"

namespace sp::data {
namespace pretok_detail {

// Which run a character belongs to. Invalid bytes are their own pieces.
enum class Run : unsigned char { kLetter, kHan, kDigit, kSpace, kPunct, kInvalid };

inline Run run_of(std::string_view s, size_t i, int* len) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    *len = 1;
    if ((b | 0x20) >= 'a' && (b | 0x20) <= 'z') return Run::kLetter;
    if (b >= '0' && b <= '9') return Run::kDigit;
    if (b == ' ' || (b >= 0x09 && b <= 0x0D)) return Run::kSpace;
    return Run::kPunct;
  }
  const Utf8Char c = utf8_next(s, i);
  *len = c.len;
  if (!c.valid) return Run::kInvalid;
  switch (char_class(c.cp)) {
    case CharClass::kLatin:
    case CharClass::kLetter:
      return Run::kLetter;
    case CharClass::kHan:
      return Run::kHan;
    case CharClass::kDigit:
      return Run::kDigit;
    case CharClass::kSpace:
      return Run::kSpace;
    case CharClass::kPunct:
      return Run::kPunct;
  }
  return Run::kPunct;
}

// GPT-2's contractions: 's 't 're 've 'm 'll 'd (lower case, ASCII apostrophe). Returns the length or 0.
inline size_t contraction_at(std::string_view s, size_t i) {
  if (s[i] != '\'' || i + 1 >= s.size()) return 0;
  const char a = s[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 < s.size()) {
    const char b = s[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  }
  return 0;
}

}  // namespace pretok_detail

template <typename Emit>
void pretokenize_each(std::string_view s, Emit&& emit) {
  using pretok_detail::Run;
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    if (const size_t c = pretok_detail::contraction_at(s, i)) {
      emit(i, i + c);
      i += c;
      continue;
    }
    int len = 0;
    Run run = pretok_detail::run_of(s, i, &len);
    const size_t start = i;
    if (run == Run::kInvalid) {
      emit(i, i + 1);
      i += 1;
      continue;
    }
    if (run == Run::kSpace) {
      // A white-space run is one piece, except that a final ' ' directly before a non-space
      // character is left to prefix the next piece (GPT-2's "\s+(?!\S)" and " ?\p{L}+").
      size_t j = i + static_cast<size_t>(len);
      size_t last = i;
      while (j < n) {
        int l2 = 0;
        if (pretok_detail::run_of(s, j, &l2) != Run::kSpace) break;
        last = j;
        j += static_cast<size_t>(l2);
      }
      if (j < n && s[last] == ' ') {
        int l3 = 0;
        const Run next = pretok_detail::run_of(s, j, &l3);
        if (next != Run::kInvalid) {
          if (last > start) emit(start, last);
          i = last;  // the space starts the next piece
          len = 1;
          run = next;
          // fall through into the run scanner with a leading space
          size_t k = j;
          size_t digits = 0;
          while (k < n) {
            int l4 = 0;
            if (pretok_detail::run_of(s, k, &l4) != run) break;
            if (run == Run::kDigit && ++digits > 3) break;
            k += static_cast<size_t>(l4);
          }
          emit(i, k);
          i = k;
          continue;
        }
      }
      emit(start, j);
      i = j;
      continue;
    }
    // Letter, Han, digit (at most 3) or punctuation run.
    size_t k = i + static_cast<size_t>(len);
    size_t digits = 1;
    while (k < n) {
      int l2 = 0;
      if (pretok_detail::run_of(s, k, &l2) != run) break;
      if (run == Run::kDigit && ++digits > 3) break;
      k += static_cast<size_t>(l2);
    }
    emit(start, k);
    i = k;
  }
}

}  // namespace sp::data
