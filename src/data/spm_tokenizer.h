// A user's SentencePiece model (LLaMA-1/2's tokenizer.model) as a TextEncoder, through Debian's
// libsentencepiece: the very library `spm_encode` is, so the ids are the reference's by construction, and
// tests/data/tokenizers_test.py checks the whole bundled corpus against `spm_encode --output_format=id`.
// Not a trainer and not a re-implementation: normalization, the dummy prefix, byte fallback and the BPE or
// unigram search are the model's own settings. Encode adds no BOS or EOS (spm_encode adds none either).
// Invariant: the model is parsed from the same bytes whose SHA-256 identifies it (no second read).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "data/text_encoder.h"

namespace sp::data {

// `bytes` is the .model file's content, `name` the file named in errors. Refused (exit 2), in our words: an
// empty file, a file cut short or damaged (its protobuf fields are walked first: one running past the end, the
// trainer_spec or normalizer_spec missing), pieces the library refuses, a model without an end-of-sequence id
// (eos_id = -1), more than 2^24 pieces.
Result<std::unique_ptr<TextEncoder>> load_spm_tokenizer(const std::string& bytes, const std::string& name);

}  // namespace sp::data
