// A user's Hugging Face tokenizer.json as a TextEncoder: BPE with byte fallback, as LLaMA-1/2's tokenizer
// is distributed (the `tokenizers` library's BPE model converted from the SentencePiece model).
// Every key of the format sorted into read, ignored-with-a-reason or refused (docs/data.md §"A user's tokenizer"):
//   read     model {type "BPE", vocab, merges ("a b" strings or [a, b] pairs), byte_fallback, unk_token,
//            fuse_unk, ignore_merges, dropout (null or 0), continuing_subword_prefix and end_of_word_suffix
//            (null or "")}; normalizer null | Prepend | Replace (a String pattern) | a Sequence of them;
//            pre_tokenizer null | Metaspace {replacement, prepend_scheme always|first|never, split,
//            add_prefix_space}; added_tokens (ids counted in the vocabulary; the end-of-sequence token);
//   ignored  post_processor (it adds BOS to a model's input: data prepare adds none), decoder (decoding
//            only), truncation and padding (batching), version;
//   refused  any other normalizer (NFKC, Lowercase, ...) or pre_tokenizer (ByteLevel: LLaMA-3's byte-level
//            BPE with its regex split; Whitespace; Split), any other model type (Unigram: give the
//            SentencePiece .model; WordPiece; WordLevel), a merge or an id that does not resolve.
// Encoding, as `tokenizers` 0.13–0.19 does with split_special_tokens: text → normalizer → pre-tokens → per
// pre-token, each character its vocabulary id, else its UTF-8 bytes as <0xXX> tokens (byte fallback), else
// unk (fused); then repeatedly the adjacent pair of lowest merge rank, leftmost first, is merged. Added
// tokens written in the text are not matched (a document cannot forge its end), as spm_encode does.
// Invariant: every id < vocab_size(); the end-of-sequence token is "</s>", else "<|end_of_text|>",
// "<|endoftext|>" or "<eos>", whichever the file has first in that order.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/status.h"
#include "data/text_encoder.h"

namespace sp::data {

// `j` is the tokenizer.json document (parsed strictly), `name` the file named in errors (exit 2, naming the key).
Result<std::unique_ptr<TextEncoder>> load_hf_tokenizer(const nlohmann::json& j, const std::string& name);

}  // namespace sp::data
