#include "data/pretokenize.h"

namespace sp::data {

std::vector<Piece> pretokenize(std::string_view text) {
  std::vector<Piece> out;
  pretokenize_each(text, [&](size_t b, size_t e) { out.push_back({b, e}); });
  return out;
}

}  // namespace sp::data
