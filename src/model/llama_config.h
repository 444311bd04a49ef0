// LlamaConfig: the shape of a LLaMA-style decoder, validated before anything is allocated.
// The math is Hugging Face LLaMA's (docs/kernels.md); field names follow HF's config.json
// where one exists (vocab_size, hidden_size=dim, num_hidden_layers=n_layers, ...; see to_hf_json).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace sp::model {

struct LlamaConfig {
  // The largest parameter count validate() accepts: 2^48 (281 T), so that every size in bytes derived from it
  // (model states, the ledger's categories, the planner's totals) is exact in an int64.
  static constexpr int64_t kMaxParams = int64_t{1} << 48;
  int64_t vocab_size = 0;  // V
  int64_t dim = 0;         // C
  int64_t n_layers = 0;    // L
  int64_t n_heads = 0;     // H
  int64_t n_kv_heads = 0;  // KV, divides H (grouped-query attention)
  int64_t ffn_dim = 0;     // F
  int64_t max_seq = 0;     // longest sequence RoPE tables are built for
  double rope_theta = 10000.0;
  float norm_eps = 1e-5f;
  bool tie_embeddings = false;  // lm_head.weight is model.embed_tokens.weight
  float init_std = 0.02f;       // N(0, init_std²) for every matrix; norm weights start at 1

  int64_t head_dim() const { return dim / n_heads; }  // D
  // Every violated rule, one per line, with the fix ("dim 250 is not divisible by n_heads 8 ...").
  Status validate() const;
  int64_t param_count() const;

  nlohmann::json to_json() const;
  // Strict: unknown keys and wrong types are errors naming the key.
  static Result<LlamaConfig> from_json(const nlohmann::json& j);
  // config.json as transformers' LlamaConfig reads it, and exactly what config/hf_config.h reads back into
  // this config (floats as their shortest decimal, so 1e-5f is written 1e-05). `torch_dtype` names the
  // weights' storage dtype ("float32", "bfloat16").
  nlohmann::json to_hf_json(const std::string& torch_dtype = "float32") const;
};

}  // namespace sp::model
