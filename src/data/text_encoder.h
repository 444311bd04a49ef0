// TextEncoder: what `data prepare` needs from a tokenizer — text in, token ids out, the vocabulary size and
// the id written after every document. Three implementations, one per file:
//   tokenizer.h        the engine's own byte-level BPE, trained on the train split (kind "shardproof-bpe");
//   spm_tokenizer.h    a user's SentencePiece model (LLaMA-1/2's tokenizer.model), through libsentencepiece;
//   hf_tokenizer.h     a user's Hugging Face tokenizer.json: BPE with byte fallback, as LLaMA's is converted.
// Not a decoder and not a chat template: no BOS is added; documents are separated by the caller with eos_id().
// Invariant: encode() is a pure function of the tokenizer file's bytes and the text; every id is
// < vocab_size(); the file's SHA-256 (sha256()) identifies the tokenizer in the lineage and the contract.
// Reference: docs/data.md §"A user's tokenizer", docs/formats/tokens.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sp::data {

class TextEncoder {
 public:
  virtual ~TextEncoder() = default;
  // "shardproof-bpe", "sentencepiece" or "hf-tokenizer-json".
  virtual std::string_view kind() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The id written after every document (<|endoftext|>, or the tokenizer's end-of-sequence token).
  virtual uint32_t eos_id() const = 0;
  // The end-of-sequence token's text ("</s>"), for the lineage.
  virtual std::string eos_token() const = 0;
  virtual void encode_append(std::string_view text, std::vector<uint32_t>& out) const = 0;
  std::vector<uint32_t> encode(std::string_view text) const {
    std::vector<uint32_t> out;
    encode_append(text, out);
    return out;
  }
};

// A user's tokenizer from its file's bytes (`name` is named in errors): a SentencePiece model (bytes not
// starting with '{', e.g. tokenizer.model) or JSON — an HF tokenizer.json, or a shardproof-bpe
// tokenizer.json of an earlier `data prepare`. Errors name the file and what is not supported, exit 2.
Result<std::unique_ptr<TextEncoder>> load_text_encoder(const std::string& bytes, const std::string& name);
// The file at `path` (at most 256 MiB), read once: its bytes (to hash and copy) and the encoder made of them.
struct TokenizerFile {
  std::string bytes;
  std::unique_ptr<TextEncoder> encoder;
};
Result<TokenizerFile> read_tokenizer_file(const std::string& path);

}  // namespace sp::data
