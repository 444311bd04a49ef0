// Hugging Face LLaMA config.json → the engine's model::LlamaConfig, strictly, by one parser (the planner
// reads its ModelShape from the same config, planner/model_shape.h). It is not a transformers port: it accepts only
// configs whose math is the engine's (docs/architecture.md), so a plan for them is a plan for a model the engine
// trains. Invariant: a key is either read (a size or a number of the math), checked to hold the value that leaves the
// math unchanged (rope_scaling null, attention_bias false, hidden_act "silu", ...; any other value is refused naming
// the key and why), ignored because it cannot change the math (token ids, storage dtype, versions), or refused as
// unknown. Every problem is reported at once (exit 2). A key the file leaves out takes transformers' LlamaConfig
// default (rms_norm_eps 1e-6, rope_theta 10000, ...), never the engine's own. Reference: transformers' LlamaConfig
// docs; docs/huggingface.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "model/llama_config.h"

namespace sp::config {

// What one config.json means, key by key.
struct HfModelConfig {
  std::string name;          // the model's name: the file's directory ("Llama-2-7b-hf")
  model::LlamaConfig model;  // the engine's model; init_std from initializer_range
  // Per key of the file (and per absent key that took a default): {"value"|"default": v, "became":
  // "model.dim"} for a read key, {"value": v, "checked": why} for a neutral one, {"value": v, "ignored":
  // why} for an ignored one (docs/huggingface.md).
  nlohmann::json mapping = nlohmann::json::object();
  std::string file;    // the path read (absolute, normalized); empty for an in-memory config
  std::string sha256;  // of the file's bytes
};

// `origin` names the file in messages; `name` becomes the config's name.
Result<HfModelConfig> hf_model_from_json(const nlohmann::json& config, const std::string& name,
                                         const std::string& origin);
// Reads a config.json (strict JSON: no duplicate keys, bounded size); every error is a usage error
// (exit 2) naming the file. The shape is named after the file's directory ("Llama-2-7b-hf/config.json" →
// "Llama-2-7b-hf").
Result<HfModelConfig> read_hf_model_config(const std::string& path);

// The run configuration (TOML as JSON, before --set) with its model from `hf`: [model] is replaced by
// the file's model, data.vocab_size set to its vocab_size (the tokenizer is trained to the model's
// vocabulary), and a "model_config" section records the file, its SHA-256 and the mapping (the run's
// contract then holds them).
void apply_hf_model_config(nlohmann::json& run_config, const HfModelConfig& hf);

}  // namespace sp::config
