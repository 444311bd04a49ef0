// Hugging Face LLaMA config.json → ModelShape, strictly. It is not a transformers port: it accepts only
// configs whose math is the engine's (docs/architecture.md), so a plan for them is a plan for a model
// the engine could train. Invariant: a key is either read (a size), checked to hold the value that leaves
// the math unchanged (rope_scaling null, attention_bias false, hidden_act "silu", ...; any other value is
// refused naming the key and why), ignored because it cannot change the math (token ids, dtype, versions),
// or refused as unknown. Every problem is reported at once. Reference: transformers' LlamaConfig docs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "plan/model_shape.h"

namespace sp::plan {

// `origin` names the file in messages.
Result<ModelShape> shape_from_hf_config(const nlohmann::json& config, const std::string& name,
                                        const std::string& origin);
// Reads a config.json; the shape is named after the file's directory ("Llama-2-7b-hf/config.json" →
// "Llama-2-7b-hf").
Result<ModelShape> read_hf_config(const std::string& path);

}  // namespace sp::plan
