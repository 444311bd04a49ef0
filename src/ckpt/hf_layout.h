// The Hugging Face model directory layout, as transformers' save_pretrained writes it and from_pretrained
// reads it: config.json, and either one model.safetensors or shards model-0000i-of-0000N.safetensors named
// by model.safetensors.index.json ({"metadata": {"total_size": bytes}, "weight_map": {tensor: file}}).
// Not the tensors (ckpt/hf_weights.h reads and writes them) and not config.json's keys (config/hf_config.h).
// Invariant: an HfIndex exists only for an index that passed every rule of docs/formats/huggingface.md
// (weight_map non-empty, every file a plain file name, total_size a non-negative integer); the shard plan
// is huggingface_hub's split_state_dict_into_shards, so an export is laid out as transformers lays it out.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sp::ckpt {

inline constexpr std::string_view kHfConfigFile = "config.json";
inline constexpr std::string_view kHfSingleFile = "model.safetensors";
inline constexpr std::string_view kHfIndexFile = "model.safetensors.index.json";
inline constexpr uint64_t kHfDefaultMaxShardBytes = 5'000'000'000;  // transformers' max_shard_size "5GB"

// "model-00002-of-00003.safetensors" for shard `index` (1-based) of `count` (at least 5 digits each).
std::string hf_shard_file_name(int index, int count);

// "5GB" → 5·10^9 (KB, MB, GB, TB are powers of 10 as huggingface_hub reads them; KiB, MiB, GiB, TiB powers of
// 2; a plain integer is bytes; a decimal value is allowed, "1.5GB"). Case-insensitive; at least 1 byte.
Result<uint64_t> parse_shard_size(std::string_view text);

struct HfIndex {
  std::optional<uint64_t> total_size;                  // metadata.total_size: the tensors' bytes, summed
  std::map<std::string, std::string> weight_map;       // tensor name → shard file name (in the index's directory)
  nlohmann::json metadata = nlohmann::json::object();  // the whole metadata object (other keys are kept)
  std::vector<std::string> files() const;              // distinct shard file names, sorted
};
// Strict: keys "weight_map" (required) and "metadata" (optional object) only; every value of weight_map a
// file name passing check_path_component; total_size, when present, a non-negative integer. `label` names
// the file in errors.
Result<HfIndex> parse_hf_index(const nlohmann::json& j, const std::string& label);
// The index as save_pretrained writes it: metadata.total_size, weight_map, keys sorted, indent 2, "\n".
std::string hf_index_text(const HfIndex& index);

// Which tensors go into which shard: tensors in order, a new shard when the next one would take the current
// shard past `max_shard_bytes`, a tensor larger than that alone in a shard of its own (placed in the list when
// it is met). Returns the tensors' positions per shard; one shard means a single model.safetensors.
std::vector<std::vector<size_t>> plan_hf_shards(const std::vector<uint64_t>& tensor_bytes, uint64_t max_shard_bytes);

}  // namespace sp::ckpt
