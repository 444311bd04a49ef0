// Consolidated weights: one safetensors file with every parameter under its Hugging Face name, F32,
// (out, in) layout, plus an HF-style config.json beside it: `shardproof ckpt export --out FILE` (the
// sharded Hugging Face layout is ckpt/hf_weights.h, which also reads both back for `train --init-from`).
// Not a training checkpoint: no optimizer state, no step, no data position.
// Invariant: the file holds exactly the model's weight table, each tensor in its logical shape.
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

// Weights by HF name, fp32, row-major in their logical shape. Reading them (this file's export, or any
// Hugging Face LLaMA safetensors) is ckpt/hf_weights.h's read_hf_weights.
using NamedTensors = std::map<std::string, std::vector<float>>;

}  // namespace sp::ckpt
