#include "plan/hf_config.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>

#include "core/file_io.h"

namespace sp::plan {
namespace {

using nlohmann::json;

// Keys that cannot change the math of a training step: identifiers, token ids, storage dtype, caching.
const std::set<std::string> kIgnored = {"_name_or_path",     "architectures", "bos_token_id",         "eos_token_id",
                                        "pad_token_id",      "torch_dtype",   "transformers_version", "use_cache",
                                        "initializer_range", "pretraining_tp"};

// Keys that change the math unless they hold the value shown: (key, the neutral value, why).
struct Neutral {
  const char* key;
  json value;
  const char* why;
};
const std::vector<Neutral>& neutral_keys() {
  static const std::vector<Neutral> k = {
      {"rope_scaling", nullptr, "RoPE scaling (linear, dynamic, yarn, llama3) changes the rotary angles"},
      {"attention_bias", false, "biases on q/k/v/o projections are parameters and FLOPs the engine does not have"},
      {"mlp_bias", false, "biases on gate/up/down projections are parameters the engine does not have"},
      {"attention_dropout", 0.0, "dropout changes the training step"},
      {"hidden_act", "silu", "the engine's MLP is SwiGLU: down(silu(gate(x)) * up(x))"},
      {"model_type", "llama", "only LLaMA-style decoders are supported"},
  };
  return k;
}

}  // namespace

Result<ModelShape> shape_from_hf_config(const json& j, const std::string& name, const std::string& origin) {
  if (!j.is_object()) return invalid_argument("{}: a Hugging Face config must be a JSON object", origin);
  std::vector<std::string> errs;
  std::set<std::string> read;
  auto integer = [&](const char* key, bool required, int64_t fallback) -> int64_t {
    read.insert(key);
    if (!j.contains(key)) {
      if (required) errs.push_back(fmt::format("missing key \"{}\" (rule: a positive integer)", key));
      return fallback;
    }
    const json& v = j.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
      errs.push_back(fmt::format("\"{}\" = {} must be a positive integer", key, v.dump()));
      return fallback;
    }
    return v.get<int64_t>();
  };
  ModelShape s;
  s.name = name;
  s.source = origin;
  s.family = ModelFamily::kLlama;
  s.vocab_size = integer("vocab_size", true, 1);
  s.dim = integer("hidden_size", true, 1);
  s.ffn_dim = integer("intermediate_size", true, 1);
  s.n_layers = integer("num_hidden_layers", true, 1);
  s.n_heads = integer("num_attention_heads", true, 1);
  s.n_kv_heads = integer("num_key_value_heads", false, s.n_heads);
  s.max_seq = integer("max_position_embeddings", true, 1);
  // Numbers that enter the math but not the plan's sizes: checked for type only.
  for (const char* key : {"rms_norm_eps", "rope_theta"}) {
    read.insert(key);
    if (j.contains(key) && !(j.at(key).is_number() && j.at(key).get<double>() > 0))
      errs.push_back(fmt::format("\"{}\" = {} must be a positive number", key, j.at(key).dump()));
  }
  read.insert("tie_word_embeddings");
  if (j.contains("tie_word_embeddings")) {
    if (j.at("tie_word_embeddings").is_boolean())
      s.tie_embeddings = j.at("tie_word_embeddings").get<bool>();
    else
      errs.push_back(
          fmt::format("\"tie_word_embeddings\" = {} must be true or false", j.at("tie_word_embeddings").dump()));
  }
  read.insert("head_dim");
  if (j.contains("head_dim") && s.n_heads > 0 &&
      !(j.at("head_dim").is_number_integer() && j.at("head_dim").get<int64_t>() * s.n_heads == s.dim))
    errs.push_back(
        fmt::format("\"head_dim\" = {} is refused: the engine's head_dim is hidden_size / "
                    "num_attention_heads = {} / {}; a different head_dim changes the attention shapes",
                    j.at("head_dim").dump(), s.dim, s.n_heads));
  for (const Neutral& n : neutral_keys()) {
    read.insert(n.key);
    if (!j.contains(n.key)) continue;
    const json& v = j.at(n.key);
    const bool same = v.is_number() && n.value.is_number() ? v.get<double>() == n.value.get<double>() : v == n.value;
    if (!same)
      errs.push_back(
          fmt::format("\"{}\" = {} is refused: {} (only {} is supported)", n.key, v.dump(), n.why, n.value.dump()));
  }
  if (j.contains("architectures")) {
    const json& a = j.at("architectures");
    if (!(a.is_array() && a.size() == 1 && a[0] == "LlamaForCausalLM"))
      errs.push_back(
          fmt::format("\"architectures\" = {} is refused: only [\"LlamaForCausalLM\"] is supported", a.dump()));
  }
  for (const auto& [key, value] : j.items())
    if (!read.count(key) && !kIgnored.count(key))
      errs.push_back(
          fmt::format("unknown key \"{}\" = {}: shardproof does not know whether it changes the math, so "
                      "it refuses it",
                      key, value.dump().substr(0, 60)));
  if (errs.empty()) {
    Status v = s.validate();
    if (!v.ok()) errs.push_back(v.message());
  }
  if (errs.empty()) return s;
  std::string msg = fmt::format("{}: not a LLaMA config shardproof can plan for ({} problem{}):", origin, errs.size(),
                                errs.size() == 1 ? "" : "s");
  for (const auto& e : errs) msg += "\n  - " + e;
  return Status(StatusCode::kInvalidArgument, msg,
                "docs/plan.md lists the keys read, the keys that must hold their neutral value and the keys ignored");
}

Result<ModelShape> read_hf_config(const std::string& path) {
  if (!std::filesystem::exists(path)) return invalid_argument("model file '{}' does not exist", path);
  SP_ASSIGN_OR_RETURN(std::string text, read_file(path, uint64_t{1} << 24));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("{} is not valid JSON", path);
  std::string name = std::filesystem::path(path).parent_path().filename().string();
  if (name.empty()) name = std::filesystem::path(path).stem().string();
  return shape_from_hf_config(j, name, path);
}

}  // namespace sp::plan
