// DeepSpeed's ds_config.json → the RunConfig's JSON, strictly (docs/deepspeed.md). Not DeepSpeed: it
// reproduces what of a LLaMA ds_config shardproof's engine can honour and says so per key. Invariant:
// every key of the file is either mapped onto a RunConfig key (its outcome names the key and value),
// accepted with no effect (its outcome says why: the values of the training are the same without it),
// or refused by name with the reason (offload, MoE, compression, and every key DeepSpeed's own strict
// pydantic validation would not know); all problems are reported at once, before anything runs.
// The batch keys follow DeepSpeed's rule train_batch_size = micro × accumulation × dp and its inference
// of the missing one (DeepSpeedConfig._set_batch_related_parameters / _batch_assertion).
// Reference: https://www.deepspeed.ai/docs/config-json/, deepspeed/runtime/config.py, lr_schedules.py.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace sp::config {

// One ds_config key and what it became.
struct DsKeyOutcome {
  enum class Kind { kMapped, kNoEffect };
  std::string key;  // dotted: "zero_optimization.stage", "optimizer.params.betas"
  Kind kind = Kind::kMapped;
  std::string outcome;             // "parallel.zero = 2", "train.beta1 = 0.9, train.beta2 = 0.95", or the reason
  std::string line() const;        // "key → outcome" / "key: accepted, no effect: why"
  nlohmann::json to_json() const;  // {"key", "kind": "mapped"|"no_effect", "outcome"}
};

struct DsMapping {
  std::vector<DsKeyOutcome> keys;  // in the file's key order, nested keys after their section
  // The batch triple after DeepSpeed's inference, and the dp it was checked against.
  int64_t train_batch_size = 0, micro_batch = 0, gradient_accumulation_steps = 0;
  int dp = 1;
  nlohmann::json to_json() const;  // {"dp", "train_batch_size", "micro_batch", "gradient_accumulation_steps", "keys"}
};

// Reads a ds_config.json: a missing file, an unreadable one or malformed JSON is a usage error (exit 2)
// naming the path (and where nlohmann places the syntax error).
Result<nlohmann::json> read_ds_config(const std::string& path);

// Maps `ds` onto `config` (the RunConfig JSON after the preset or --config, before any --set). `dp` is
// DeepSpeed's data-parallel world size for the batch rule. On any problem `config` is left unchanged and
// the error lists every problem, each naming its key (kInvalidArgument, exit 2).
Result<DsMapping> apply_ds_config(const nlohmann::json& ds, int dp, nlohmann::json& config);

}  // namespace sp::config
