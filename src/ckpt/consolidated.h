// Consolidated weights: one safetensors file with every parameter under its Hugging Face name, F32,
// (out, in) layout, plus an HF-style config.json beside it: `shardproof ckpt export`, and the
// import side (`shardproof train --init-from FILE`). Not a training checkpoint: no optimizer state,
// no step, no data position.
// Invariant: read_consolidated returns exactly the model's weight table, each tensor with its exact
// logical shape and only finite values; anything else is refused naming the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ckpt/names.h"
#include "core/status.h"
#include "model/llama_config.h"

namespace sp::ckpt {

struct ExportSummary {
  std::string weights_path, config_path;
  int64_t step = 0;
  size_t tensors = 0;
  uint64_t bytes = 0;
};
// Verifies checkpoint `step` (sizes and SHA-256), assembles every parameter and writes `out_path`
// (temp + rename) and config.json in the same directory.
Result<ExportSummary> export_consolidated(const CheckpointPaths& paths, int64_t step, const std::string& out_path);

using NamedTensors = std::map<std::string, std::vector<float>>;
// Reads consolidated weights for `config`: every tensor of the weight table, no other, F32, exact
// shapes, finite. A config.json beside the file must agree with config.to_hf_json() key by key.
Result<NamedTensors> read_consolidated(const std::string& path, const model::LlamaConfig& config);

}  // namespace sp::ckpt
