// ModelShape: the sizes of a decoder-only transformer the planner prices — our LLaMA-style engine's
// models (presets, any Hugging Face LLaMA config.json, config/hf_config.h) and the GPT-style shapes of the
// published results the planner is validated against (GPT-3, the Megatron scaling study). It is not a
// model: no weights, no math beyond counting parameters and the weights a token meets.
// Invariant: for the llama family the parameter count is model::LlamaConfig::param_count() itself (the
// engine's own count, not a second formula). The gpt family is Megatron's GPT: learned position
// embeddings, LayerNorm with bias, biases on every linear layer, a 2-matrix GeLU MLP, tied embeddings
// (Narayanan et al. SC'21 eq. 2, plus the final LayerNorm's 2h that eq. 2 leaves out).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/hf_config.h"
#include "core/status.h"
#include "model/llama_config.h"

namespace sp::planner {

enum class ModelFamily { kLlama, kGpt };
std::string model_family_name(ModelFamily family);  // "llama", "gpt"

struct ModelShape {
  std::string name;
  std::string source;  // where the shape comes from (paper table, file path)
  ModelFamily family = ModelFamily::kLlama;
  int64_t vocab_size = 0;  // V
  int64_t dim = 0;         // C (h in Megatron's papers)
  int64_t n_layers = 0;    // L
  int64_t n_heads = 0;     // H (a)
  int64_t n_kv_heads = 0;  // KV
  int64_t ffn_dim = 0;     // F
  int64_t max_seq = 0;     // s: longest sequence (GPT: rows of the position embedding)
  bool tie_embeddings = false;

  int64_t head_dim() const { return dim / n_heads; }  // D
  // Weight matrices in the MLP: 3 for SwiGLU (gate, up, down), 2 for GeLU (fc1, fc2).
  int mlp_matrices() const { return family == ModelFamily::kLlama ? 3 : 2; }
  // Weights one token multiplies in one block: q, k, v, o and the MLP; (H·D + 2·KV·D)·C + H·D·C + m·C·F.
  int64_t block_matmul_params() const;
  int64_t param_count() const;
  // Every violated rule in one kInvalidArgument message naming the field.
  Status validate() const;
  // The engine's config (llama family only; SP_CHECK otherwise). max_seq, theta and eps as given.
  model::LlamaConfig llama_config() const;
  // The LLaMA-family shape the engine (and so its ledger and traffic models) can plan in place of this one.
  // A llama shape is its own. A gpt shape keeps V, C, L, H, s and tied embeddings and replaces its GeLU MLP
  // (2·C·F weights) by a SwiGLU MLP of about the same weights per token: 3·C·F' with F' = 2F/3 rounded to the
  // nearest multiple of 8 (so tp up to 8 divides it). It drops the biases, the learned positions and the
  // LayerNorms' biases, which no GEMM multiplies, and names itself "<name> (engine counterpart)".
  ModelShape engine_counterpart() const;
  nlohmann::json to_json() const;

  static ModelShape from_llama(const model::LlamaConfig& config, std::string name, std::string source);
};

// A well-known shape with the parameter count its source publishes, to the digits it publishes.
struct NamedShape {
  ModelShape shape;
  double published_billions = 0;  // as printed in the source ("6.7", "145.6", "175")
  int published_decimals = 0;     // digits after the point in that printed figure
  // True when the source cuts digits off instead of rounding (LLaMA's Table 2 prints 65,285,660,672 as
  // "65.2B"): the count then lies in [printed, printed + one unit), else within half a unit.
  bool published_truncated = false;
  bool matches_published(double billions) const;
};

// LLaMA-7B/13B/33B/65B (Touvron et al. 2023), GPT-3 175B (Brown et al. 2020) and the ten shapes of the
// Megatron-LM scaling study (Narayanan et al. SC'21, Table 1); sources in model_shape.cc.
const std::vector<NamedShape>& named_shapes();
// Case-insensitive; an unknown name lists the known ones (kInvalidArgument).
Result<ModelShape> named_shape(const std::string& name);

// A Hugging Face config.json's shape: config/hf_config.h reads it (one parser for the engine and the
// planner), ModelShape::from_llama gives its sizes; `origin` names the file in messages.
Result<ModelShape> shape_from_hf_config(const nlohmann::json& config, const std::string& name,
                                        const std::string& origin);
Result<ModelShape> read_hf_config(const std::string& path);

}  // namespace sp::planner
