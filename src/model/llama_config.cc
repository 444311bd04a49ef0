#include "model/llama_config.h"

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "core/json_io.h"

namespace sp::model {

Status LlamaConfig::validate() const {
  std::vector<std::string> errors;
  auto positive = [&](const char* key, int64_t v) {
    if (v <= 0) errors.push_back(fmt::format("model.{} = {} must be a positive integer", key, v));
  };
  positive("vocab_size", vocab_size);
  positive("dim", dim);
  positive("n_layers", n_layers);
  positive("n_heads", n_heads);
  positive("n_kv_heads", n_kv_heads);
  positive("ffn_dim", ffn_dim);
  positive("max_seq", max_seq);
  if (n_heads > 0 && dim > 0 && dim % n_heads != 0)
    errors.push_back(
        fmt::format("model.dim {} is not divisible by model.n_heads {} (head_dim = dim / n_heads must be "
                    "an integer); hint: choose dim a multiple of n_heads",
                    dim, n_heads));
  if (n_heads > 0 && dim > 0 && dim % n_heads == 0 && head_dim() % 2 != 0)
    errors.push_back(
        fmt::format("head_dim = dim / n_heads = {} is odd; RoPE rotates pairs and needs an even head_dim", head_dim()));
  if (n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads != 0)
    errors.push_back(
        fmt::format("model.n_heads {} is not divisible by model.n_kv_heads {} (each key/value head serves "
                    "n_heads / n_kv_heads query heads); hint: use n_kv_heads in the divisors of {}",
                    n_heads, n_kv_heads, n_heads));
  if (n_kv_heads > n_heads && n_heads > 0)
    errors.push_back(fmt::format("model.n_kv_heads {} exceeds model.n_heads {}", n_kv_heads, n_heads));
  if (!(rope_theta > 0.0)) errors.push_back(fmt::format("model.rope_theta = {} must be > 0", rope_theta));
  if (!(norm_eps > 0.0f)) errors.push_back(fmt::format("model.norm_eps = {} must be > 0", norm_eps));
  if (!(init_std > 0.0f)) errors.push_back(fmt::format("model.init_std = {} must be > 0", init_std));
  if (vocab_size > (int64_t{1} << 31) - 1)
    errors.push_back(fmt::format("model.vocab_size = {} does not fit int32 token ids", vocab_size));
  if (errors.empty()) {
    // Every size derived from the shape (a tensor's elements, a unit's, the bytes the ledger multiplies them
    // into) is an int64: the parameter count is computed exactly here and bounded by kMaxParams.
    using Wide = __int128;
    const Wide d = dim, hd = head_dim(), f = ffn_dim;
    const Wide per_layer = 2 * d + (n_heads * hd + 2 * n_kv_heads * hd) * d + d * n_heads * hd + 3 * f * d;
    const Wide total = Wide(vocab_size) * d * (tie_embeddings ? 1 : 2) + Wide(n_layers) * per_layer + d;
    if (total > kMaxParams)
      errors.push_back(fmt::format(
          "model.dim = {}, model.ffn_dim = {}, model.n_layers = {} and model.vocab_size = {} make {:.3g} parameters, "
          "more than the 2^48 ≈ 2.8e14 whose sizes in bytes the engine computes exactly in 64 bits; hint: a "
          "smaller model (the largest published LLaMA has 4.05e11)",
          dim, ffn_dim, n_layers, vocab_size, static_cast<double>(total)));
  }
  if (errors.empty()) return Status();
  std::string msg = "invalid model configuration:";
  for (const auto& e : errors) msg += "\n  - " + e;
  return Status(StatusCode::kInvalidArgument, msg);
}

int64_t LlamaConfig::param_count() const {
  const int64_t D = head_dim();
  const int64_t per_layer = 2 * dim + (n_heads * D + 2 * n_kv_heads * D) * dim + dim * n_heads * D + 3 * ffn_dim * dim;
  return vocab_size * dim * (tie_embeddings ? 1 : 2) + n_layers * per_layer + dim;
}

nlohmann::json LlamaConfig::to_json() const {
  return {{"vocab_size", vocab_size}, {"dim", dim},
          {"n_layers", n_layers},     {"n_heads", n_heads},
          {"n_kv_heads", n_kv_heads}, {"ffn_dim", ffn_dim},
          {"max_seq", max_seq},       {"rope_theta", rope_theta},
          {"norm_eps", norm_eps},     {"tie_embeddings", tie_embeddings},
          {"init_std", init_std}};
}

Result<LlamaConfig> LlamaConfig::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return invalid_argument("model configuration must be an object, got {}", j.type_name());
  static const std::set<std::string> kKnown = {"vocab_size", "dim",     "n_layers",   "n_heads",  "n_kv_heads",
                                               "ffn_dim",    "max_seq", "rope_theta", "norm_eps", "tie_embeddings",
                                               "init_std"};
  for (const auto& [key, value] : j.items())
    if (!kKnown.count(key))
      return invalid_argument("unknown key model.{}", shown_key(key))
          .with_hint(
              "known keys: vocab_size, dim, n_layers, n_heads, n_kv_heads, ffn_dim, max_seq, rope_theta, "
              "norm_eps, tie_embeddings, init_std");
  LlamaConfig c;
  auto get_int = [&](const char* key, int64_t& out, bool required) -> Status {
    if (!j.contains(key)) {
      if (required) return invalid_argument("missing key model.{}", key);
      return Status();
    }
    const auto& v = j.at(key);
    if (!v.is_number_integer()) return invalid_argument("model.{} must be an integer, got {}", key, v.dump());
    out = v.get<int64_t>();
    return Status();
  };
  auto get_num = [&](const char* key, auto& out) -> Status {
    if (!j.contains(key)) return Status();
    const auto& v = j.at(key);
    if (!v.is_number()) return invalid_argument("model.{} must be a number, got {}", key, v.dump());
    out = v.get<std::remove_reference_t<decltype(out)>>();
    return Status();
  };
  SP_RETURN_IF_ERROR(get_int("vocab_size", c.vocab_size, true));
  SP_RETURN_IF_ERROR(get_int("dim", c.dim, true));
  SP_RETURN_IF_ERROR(get_int("n_layers", c.n_layers, true));
  SP_RETURN_IF_ERROR(get_int("n_heads", c.n_heads, true));
  c.n_kv_heads = c.n_heads;
  SP_RETURN_IF_ERROR(get_int("n_kv_heads", c.n_kv_heads, false));
  SP_RETURN_IF_ERROR(get_int("ffn_dim", c.ffn_dim, true));
  SP_RETURN_IF_ERROR(get_int("max_seq", c.max_seq, true));
  SP_RETURN_IF_ERROR(get_num("rope_theta", c.rope_theta));
  SP_RETURN_IF_ERROR(get_num("norm_eps", c.norm_eps));
  SP_RETURN_IF_ERROR(get_num("init_std", c.init_std));
  if (j.contains("tie_embeddings")) {
    if (!j.at("tie_embeddings").is_boolean())
      return invalid_argument("model.tie_embeddings must be true or false, got {}", j.at("tie_embeddings").dump());
    c.tie_embeddings = j.at("tie_embeddings").get<bool>();
  }
  SP_RETURN_IF_ERROR(c.validate());
  return c;
}

namespace {
// The shortest decimal that reads back as `x` (fmt's float formatting), as a JSON number.
double shortest_decimal(float x) { return std::stod(fmt::format("{}", x)); }
}  // namespace

nlohmann::json LlamaConfig::to_hf_json(const std::string& torch_dtype) const {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"model_type", "llama"},
          {"vocab_size", vocab_size},
          {"hidden_size", dim},
          {"intermediate_size", ffn_dim},
          {"num_hidden_layers", n_layers},
          {"num_attention_heads", n_heads},
          {"num_key_value_heads", n_kv_heads},
          {"max_position_embeddings", max_seq},
          {"rope_theta", rope_theta},
          {"rms_norm_eps", shortest_decimal(norm_eps)},
          {"tie_word_embeddings", tie_embeddings},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"initializer_range", shortest_decimal(init_std)},
          {"torch_dtype", torch_dtype}};
}

}  // namespace sp::model
