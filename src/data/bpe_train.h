// Byte-level BPE training (Sennrich et al. 2016) over the pre-tokenized train split.
// Not encoding (tokenizer.h). Invariant: deterministic — the same multiset of texts gives the same
// merges in the same order, whatever order the texts were added in: each step merges the adjacent
// pair with the highest count over all pieces (count × occurrences), ties broken by the smallest
// (left id, right id); counts are exact integers. Efficient: pair counts are kept over unique
// pieces and updated only for the pieces that contain the merged pair (no rescan per merge).
// docs/formats/tokens.md, "Training".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/status.h"
#include "data/tokenizer.h"

namespace sp::data {

struct BpeTrainStats {
  int64_t pieces = 0;         // pre-tokenized pieces seen (all lengths)
  int64_t unique_pieces = 0;  // distinct pieces of two or more bytes (what training works on)
  int64_t merges = 0;
};

// vocab_size must be at least 257 (256 bytes + <|endoftext|>); a clear error otherwise.
Status validate_vocab_size(int64_t vocab_size);

class BpeTrainer {
 public:
  void add_text(std::string_view text);
  // Learns vocab_size − 257 merges. Fails (kFailedPrecondition) when the text runs out of
  // adjacent pairs first, naming how many merges were possible.
  Result<Tokenizer> train(int64_t vocab_size, BpeTrainStats* stats = nullptr) const;

 private:
  std::unordered_map<std::string, int64_t> counts_;  // piece bytes → occurrences (pieces ≥ 2 bytes)
  int64_t pieces_ = 0;
};

}  // namespace sp::data
