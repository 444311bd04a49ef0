// `data prepare`: sources file → filtered, scrubbed, deduplicated, split, decontaminated corpus →
// BPE tokenizer trained on the train split (or a user's tokenizer file) → token shards + manifest +
// lineage, in one directory. The steps: prepare_steps.h.
// Not the loader (loader.h). Invariant: deterministic — the same sources, corpus bytes and options
// give byte-identical output files (no time, host or output path is written into them).
// Pipeline, thresholds and their reasons: docs/data.md; files: docs/formats/{tokens,lineage}.md.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "data/dedup.h"
#include "data/quality_filter.h"
#include "data/token_dataset.h"

namespace sp::data {

// Bump whenever a change to the pipeline can change any output byte: it is part of the cache key.
inline constexpr int kPipelineVersion = 1;

struct PrepareOptions {
  std::string sources_file;
  // A user's tokenizer (a SentencePiece tokenizer.model or a tokenizer.json, text_encoder.h), copied into the
  // dataset and used as given; empty: the engine's byte-level BPE trained on the train split. Its file's
  // SHA-256 is the dataset identity's tokenizer_sha256 (so the run contract's) and part of the cache key.
  std::string tokenizer_file;
  int64_t vocab_size = 2048;
  double eval_fraction = 0.05;              // share of kept documents assigned to eval, by hash
  uint64_t seed = 1234;                     // keys the split hash
  FilterOptions filter;                     // min_units 16, boilerplate share 0.6, control share 0.01
  MinHashOptions minhash;                   // 5-unit shingles, 20 bands × 6 rows, Jaccard ≥ 0.8
  int contamination_ngram = 13;             // units per n-gram in the eval/train overlap check
  int64_t shard_tokens = int64_t{1} << 20;  // tokens per shard file (the last one may be shorter)
};

// Range checks with messages that name the option; run before anything is read.
Status validate_prepare_options(const PrepareOptions& opt);
// Every option that changes the output (not sources_file), as written into lineage.json.
nlohmann::ordered_json prepare_options_json(const PrepareOptions& opt);

struct PrepareSummary {
  std::string dir;
  std::string tokenizer_sha256;
  DatasetIdentity identity;  // corpus, tokenizer, split and shard hashes + vocab size
  int64_t documents = 0, train_documents = 0, eval_documents = 0, dropped_documents = 0;
  int64_t eval_contaminated = 0;
  int64_t train_tokens = 0, eval_tokens = 0;
  bool cache_hit = false;
};
nlohmann::ordered_json summary_to_json(const PrepareSummary& s);

// A user's tokenizer against the run's vocabulary: kInvalidArgument naming the file and both sizes, with the
// data.vocab_size that fits, when they differ (`data prepare` and `train --init-from` both ask).
Status check_tokenizer_vocab(const std::string& tokenizer_file, int64_t vocab_size);

// Writes the prepared dataset into out_dir, which must not exist or be empty.
Result<PrepareSummary> prepare(const PrepareOptions& opt, const std::string& out_dir);

// Content-addressed cache: key = SHA-256 of (pipeline version, sources file bytes, every corpus
// file's SHA-256, options); returns cache_root/<key>, reused when complete and verified (every
// shard's SHA-256). Safe when several processes or threads call it at once: each prepares into its
// own temporary directory and renames it into place; a loser discards its copy and uses the winner's.
Result<PrepareSummary> prepare_cached(const PrepareOptions& opt, const std::string& cache_root);
Result<std::string> prepare_cache_key(const PrepareOptions& opt);

// Reads the summary of a prepared directory (manifest.json verified by opening both splits).
Result<PrepareSummary> read_prepared_summary(const std::string& dir);

}  // namespace sp::data
