// Pre-tokenization for the byte-level BPE tokenizer: splits text into pieces that merges never
// cross. Not the BPE itself (tokenizer.h). Invariant: the pieces are consecutive, non-empty and
// cover every byte of the input exactly once, for ANY byte string (valid UTF-8 or not), so
// concatenating them gives the input back. Rules follow GPT-2's pattern (Radford et al. 2019,
// encoder.py) with Han runs as their own class and digits in groups of at most 3; each rule is in
// docs/formats/tokens.md, "Pre-tokenization".
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace sp::data {

struct Piece {
  size_t begin = 0;
  size_t end = 0;  // exclusive
};

// Calls `emit(begin, end)` for every piece in order.
template <typename Emit>
void pretokenize_each(std::string_view text, Emit&& emit);

std::vector<Piece> pretokenize(std::string_view text);

}  // namespace sp::data

#include "data/pretokenize_inl.h"
