// A prepared dataset's split as a verified token stream: reads manifest.json, checks every field,
// the tokenizer's SHA-256 and every shard of the split (header, size, SHA-256, token ids), then
// holds the split's tokens in memory, concatenated in shard order. Not the loader (loader.h).
// Invariant: a TokenDataset that opened is exactly what the manifest describes; anything else is
// a Status naming the file and, where there is one, the byte offset.
// Format: docs/formats/tokens.md, "manifest.json".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/token_shard.h"

namespace sp::data {

inline constexpr std::string_view kManifestFile = "manifest.json";
inline constexpr std::string_view kManifestFormat = "shardproof-tokens";

enum class Split { kTrain, kEval };
const char* split_name(Split s);  // "train", "eval"

// Identity for the run contract: every hash a run depends on (definitions in tokens.md).
struct DatasetIdentity {
  std::string corpus_sha256, tokenizer_sha256, split_sha256, shards_sha256;
  int64_t vocab_size = 0;
  bool operator==(const DatasetIdentity&) const = default;
};
nlohmann::ordered_json identity_to_json(const DatasetIdentity& id);

struct ShardEntry {
  std::string file;  // a plain file name inside the prepared directory
  int64_t bytes = 0;
  int64_t num_tokens = 0;
  int64_t num_documents = 0;
  std::string sha256;
};
// SHA-256 over "<split> <file> <sha256>\n" for every shard, train first: DatasetIdentity::shards_sha256.
std::string shards_digest(const std::vector<ShardEntry>& train, const std::vector<ShardEntry>& eval);

class TokenDataset {
 public:
  // Verifies the manifest and every shard's SHA-256, header fields, and that every token id <
  // vocab_size; errors name the file and byte offset.
  static Result<TokenDataset> open(const std::string& prepared_dir, Split split);

  int64_t vocab_size() const { return identity_.vocab_size; }
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  int64_t num_documents() const { return num_documents_; }
  Split split() const { return split_; }
  const DatasetIdentity& identity() const { return identity_; }
  const std::string& dir() const { return dir_; }
  // Token i of the split's concatenated stream (0 ≤ i < num_tokens(), SP_CHECK).
  uint32_t token(int64_t i) const;
  const std::vector<uint32_t>& tokens() const { return tokens_; }

 private:
  std::string dir_;
  Split split_ = Split::kTrain;
  DatasetIdentity identity_;
  int64_t num_documents_ = 0;
  std::vector<uint32_t> tokens_;  // (N)
};

}  // namespace sp::data
