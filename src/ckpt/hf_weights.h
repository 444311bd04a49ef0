// Hugging Face LLaMA weights in and out: `train --init-from` / `grads --weights` read a single safetensors
// file, a model.safetensors.index.json with its shards, or a directory holding either; `ckpt export --hf`
// writes config.json, the shards and the index (ckpt/hf_layout.h) atomically. Not a checkpoint: no
// optimizer state, step or data position. Layout and rules: docs/formats/huggingface.md.
// Invariant: read_hf_weights returns exactly the model's weight table, every tensor with its exact logical
// shape and only finite fp32 values widened exactly from F32, BF16 or F16; otherwise it fails before
// anything is used, naming every missing, extra or mis-shaped tensor (with both shapes) and the file, as a
// usage error (exit 2). write_hf_weights(read_hf_weights(d)) reproduces d's bytes for a d it wrote.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ckpt/consolidated.h"
#include "ckpt/names.h"
#include "core/status.h"
#include "model/llama_config.h"
#include "tensor/dtype.h"

namespace sp::ckpt {

// What a weights path names: the safetensors files to read, and the index they came from (if any).
struct HfWeightFiles {
  std::string dir;                 // the directory of the files (and of a config.json that describes them)
  std::vector<std::string> files;  // full paths, sorted
  std::string index;               // full path of model.safetensors.index.json; empty for a single file
};
// `path`: a .safetensors file, a model.safetensors.index.json, or a directory holding exactly one of
// model.safetensors and model.safetensors.index.json.
Result<HfWeightFiles> locate_hf_weights(const std::string& path);

struct HfWeightsInfo {
  HfWeightFiles files;
  std::map<std::string, DType> dtypes;  // tensor → its stored dtype
  uint64_t tensor_bytes = 0;            // the tensors' bytes as stored (the index's total_size)
};
// Reads the weights for `config` (see the invariant). A config.json in the weights' directory must agree
// with `config` on every key that shapes the math (hidden_size, ..., rope_theta, rms_norm_eps).
Result<NamedTensors> read_hf_weights(const std::string& path, const model::LlamaConfig& config,
                                     HfWeightsInfo* info = nullptr);

struct HfExportOptions {
  uint64_t max_shard_bytes = 5'000'000'000;  // transformers' default "5GB"
  DType dtype = DType::kF32;                 // kF32 or kBF16 (rounded to nearest even)
  bool overwrite = false;                    // replace a non-empty output directory
};
struct HfExportSummary {
  std::string out_dir;
  std::vector<std::string> files;  // written, in the directory (config.json, shards, index)
  size_t tensors = 0;
  uint64_t tensor_bytes = 0;
  int64_t step = -1;  // the checkpoint's, for export_hf
};
// Writes `out_dir` = config.json (config.to_hf_json), the shards and (for more than one) the index: first into
// a sibling temporary directory, every file fsynced, then renamed into place. An existing non-empty
// `out_dir` is refused unless options.overwrite. `tensor` gives each weight-table tensor's fp32 values.
Result<HfExportSummary> write_hf_weights(const std::string& out_dir, const model::LlamaConfig& config,
                                         const std::function<const float*(const std::string&)>& tensor,
                                         const HfExportOptions& options);
// Verifies checkpoint `step` (sizes and SHA-256), assembles every parameter and writes them with
// write_hf_weights.
Result<HfExportSummary> export_hf(const CheckpointPaths& paths, int64_t step, const std::string& out_dir,
                                  const HfExportOptions& options);

}  // namespace sp::ckpt
