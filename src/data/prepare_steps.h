// The steps of `data prepare` (prepare.h), in the order they run; internal to src/data. Each step reads the
// state the previous ones left and records every decision in the documents' DocRecords (lineage.h).
//   read_corpus               1. sources file → corpus files (SHA-256 checked) → documents
//   filter_and_scrub          2. quality filters, PII scrubbing, 3. exact duplicates
//   remove_near_duplicates    4. MinHash + LSH candidates, exact Jaccard, clusters
//   split_and_decontaminate   5. split by hash, 6. eval documents sharing an n-gram with train removed
//   make_tokenizer            7. the engine's BPE trained on the train split, or a user's tokenizer file
//   (prepare.cc)              8. token streams, shards, lineage, manifest
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/dedup.h"
#include "data/lineage.h"
#include "data/prepare.h"
#include "data/sources.h"
#include "data/text_encoder.h"

namespace sp::data {

struct Corpus {
  SourcesFile src;
  std::vector<std::string> files;     // by source: the corpus file's bytes
  std::vector<std::string> file_sha;  // by source: their SHA-256
  std::vector<DocRecord> docs;        // corpus order
};

struct CorpusDecisions {
  NearDupResult near;
  int64_t near_removed = 0;
  int64_t train_ngrams = 0, eval_checked = 0, contaminated = 0;
};

Result<Corpus> read_corpus(const PrepareOptions& opt);
void filter_and_scrub(Corpus& c, const PrepareOptions& opt);
void remove_near_duplicates(Corpus& c, const PrepareOptions& opt, CorpusDecisions& out);
void split_and_decontaminate(Corpus& c, const PrepareOptions& opt, CorpusDecisions& out);

struct PreparedTokenizer {
  std::unique_ptr<TextEncoder> encoder;
  std::string file;                // its name in the dataset directory: tokenizer.json or tokenizer.model
  std::string bytes;               // the file written there
  std::string sha256;              // of `bytes`: the dataset identity's tokenizer_sha256
  nlohmann::ordered_json lineage;  // lineage.json's "tokenizer" section
};
// The engine's byte-level BPE trained on the kept train documents, or opt.tokenizer_file as given (its
// vocabulary must be opt.vocab_size).
Result<PreparedTokenizer> make_tokenizer(const Corpus& c, const PrepareOptions& opt);

}  // namespace sp::data
