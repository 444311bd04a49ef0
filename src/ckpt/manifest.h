// The checkpoint manifest (step-NNNNNN/manifest.json) and the LATEST pointer: what a checkpoint is,
// in one small JSON document. Not the tensor data (shard.h) and not the commit protocol (save.h).
// Invariant: parse() accepts only a document whose every field has the documented type and range
// and whose "digest" equals the SHA-256 of its canonical content (everything but "digest", dumped
// compactly with sorted keys), so a flipped bit anywhere is refused, naming the file and the field.
// Reference: docs/formats/checkpoint.md §Manifest, §LATEST.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/llama_config.h"

namespace sp::ckpt {

// The process grid a checkpoint was saved under (resharding compares two of these).
struct Topology {
  int dp = 1, tp = 1, pp = 1;
  int zero = 0;
  std::string axis_order = "tp-dp-pp";
  int servers = 0;  // parameter-server ranks after the dp·tp·pp workers (docs/ps.md); written only when > 0
  int world() const { return dp * tp * pp + servers; }
  nlohmann::json to_json() const;
  std::string describe() const;  // "dp 2 × tp 1 × pp 1, zero 1 (tp-dp-pp)"
  bool operator==(const Topology&) const = default;
};

struct ShardRecord {
  int rank = 0;
  std::string coords;  // "dp0.tp1.pp0", for people; the topology is authoritative
  std::string file;    // always shard_file_name(rank)
  uint64_t bytes = 0;
  std::string sha256;                      // of the whole file
  std::vector<std::string> sha256_chunks;  // of each kShaChunkBytes piece, chunk_count(bytes, ...) of them
};

// Size and SHA-256 of an evidence file's first `bytes` bytes when the checkpoint was taken: resuming
// truncates the file back to exactly this prefix (after checking it) and continues it.
struct FilePrefix {
  uint64_t bytes = 0;
  std::string sha256;
  bool operator==(const FilePrefix&) const = default;
};

struct Manifest {
  int64_t step = 0;           // optimizer steps completed; training resumes at this step
  nlohmann::json contract;    // the run's contract.json content (evidence/contract.h), "hash" included
  std::string contract_hash;  // contract["hash"]
  Topology topology;
  int64_t optimizer_steps = 0;   // AdamW bias-correction step count
  nlohmann::json loader_cursor;  // data/loader.h cursor for `step`
  nlohmann::json loss_scaler;    // fp16: optim::LossScaler::state_json() (docs/formats/loss_scaler.md); else null
  // {"optimizer_steps", "loader_cursor"}: what every shard records too (format.h kMetaState).
  nlohmann::json training_state() const {
    return {{"optimizer_steps", optimizer_steps}, {"loader_cursor", loader_cursor}};
  }
  std::map<std::string, FilePrefix> evidence;  // "checksums.jsonl", "metrics.jsonl"
  std::vector<ShardRecord> shards;             // one per world rank, in rank order
  std::string digest;                          // filled by seal() and parse()

  // Everything but the digest, canonical; to_json() adds "digest".
  nlohmann::json content() const;
  void seal();  // digest := SHA-256 of content().dump()
  nlohmann::json to_json() const;
  std::string to_text() const;  // indented JSON + "\n" (the digest does not depend on the layout)
  // Every field validated; `label` (the path) starts every error message.
  static Result<Manifest> parse(std::string_view text, const std::string& label);
  // The model shape recorded in the contract (config.model).
  Result<model::LlamaConfig> model_config() const;
  uint64_t total_bytes() const;
};

// RUN/checkpoints/LATEST: the newest committed checkpoint, by step and manifest digest.
struct Latest {
  int64_t step = 0;
  std::string manifest_digest;
  std::string to_text() const;
  static Result<Latest> parse(std::string_view text, const std::string& label);
};

}  // namespace sp::ckpt
