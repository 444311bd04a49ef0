#include "config/hf_config.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>

#include "core/file_io.h"
#include "core/hash.h"
#include "core/json_io.h"

namespace sp::config {
namespace {

using nlohmann::json;

// Keys that cannot change the math of a training step: identifiers, token ids, storage dtype, caching,
// and pretraining_tp (transformers splits each projection into slices whose sum is the same product).
const std::map<std::string, const char*>& ignored_keys() {
  static const std::map<std::string, const char*> k = {
      {"_name_or_path", "an identifier"},
      {"architectures", "an identifier (checked: [\"LlamaForCausalLM\"])"},
      {"bos_token_id", "a token id of the tokenizer, not of the model's math"},
      {"eos_token_id", "a token id of the tokenizer, not of the model's math"},
      {"pad_token_id", "a token id of the tokenizer, not of the model's math"},
      {"torch_dtype", "the storage dtype of the weights; the engine keeps fp32 masters (train.precision computes)"},
      {"dtype", "transformers 5's name of torch_dtype: the storage dtype, not the math"},
      {"transformers_version", "a version string"},
      {"use_cache", "inference-time key/value caching"},
      {"pretraining_tp", "a slicing of the projections with the same mathematical result"},
  };
  return k;
}

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

// transformers' LlamaConfig defaults for the optional keys the engine reads.
constexpr double kDefaultRmsNormEps = 1e-6;
constexpr double kDefaultRopeTheta = 10000.0;
constexpr double kDefaultInitializerRange = 0.02;

}  // namespace

namespace {

// One pass over a config.json: the keys read, every problem, and what each key became (the mapping).
struct HfPass {
  const json& j;
  json& mapping;
  std::vector<std::string> errs;
  std::set<std::string> read;

  void record(const char* key, const char* became, const json& fallback) {
    if (j.contains(key))
      mapping[key] = {{"value", j.at(key)}, {"became", became}};
    else
      mapping[key] = {{"default", fallback}, {"became", became}};
  }
  int64_t integer(const char* key, const char* became, bool required, int64_t fallback) {
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
    record(key, became, fallback);
    return v.get<int64_t>();
  }
  double number(const char* key, const char* became, double fallback) {
    read.insert(key);
    record(key, became, fallback);
    if (!j.contains(key)) return fallback;
    const json& v = j.at(key);
    if (!(v.is_number() && v.get<double>() > 0)) {
      errs.push_back(fmt::format("\"{}\" = {} must be a positive number", key, v.dump()));
      return fallback;
    }
    return v.get<double>();
  }
};

// transformers 5 writes RoPE as "rope_parameters": {"rope_type", "rope_theta", ...} instead of rope_theta and
// rope_scaling: read when its type is "default" (plain RoPE, the engine's), refused otherwise, and refused when it
// contradicts a rope_theta the file also gives.
void read_rope_parameters(HfPass& p, model::LlamaConfig& s) {
  p.read.insert("rope_parameters");
  if (!p.j.contains("rope_parameters") || p.j.at("rope_parameters").is_null()) return;
  const json& r = p.j.at("rope_parameters");
  const json type = r.is_object() ? r.value("rope_type", json("default")) : json();
  if (!r.is_object() || type != "default") {
    p.errs.push_back(
        fmt::format("\"rope_parameters\" = {} is refused: a rope_type other than \"default\" (linear, "
                    "dynamic, yarn, llama3) changes the rotary angles",
                    r.dump()));
    return;
  }
  for (const auto& [key, value] : r.items()) {
    if (key != "rope_type" && key != "rope_theta")
      p.errs.push_back(fmt::format("\"rope_parameters\".\"{}\" is not a key of plain RoPE: refused", key));
  }
  if (r.contains("rope_theta")) {
    const json& t = r.at("rope_theta");
    if (!(t.is_number() && t.get<double>() > 0)) {
      p.errs.push_back(fmt::format("\"rope_parameters\".\"rope_theta\" = {} must be a positive number", t.dump()));
      return;
    }
    if (p.j.contains("rope_theta") && p.j.at("rope_theta") != t)
      p.errs.push_back(fmt::format("\"rope_theta\" = {} and \"rope_parameters\".\"rope_theta\" = {} disagree",
                                   p.j.at("rope_theta").dump(), t.dump()));
    s.rope_theta = t.get<double>();
    p.mapping["rope_theta"] = {{"value", t}, {"became", "model.rope_theta"}};
  }
  p.mapping["rope_parameters"] = {{"value", r}, {"checked", "rope_type default: plain RoPE, its theta read"}};
}

// The keys the engine reads: the shape, the norm's eps, RoPE's theta, the init scale, tied embeddings.
void read_shape(HfPass& p, model::LlamaConfig& s) {
  const json& j = p.j;
  s.vocab_size = p.integer("vocab_size", "model.vocab_size and data.vocab_size", true, 1);
  s.dim = p.integer("hidden_size", "model.dim", true, 1);
  s.ffn_dim = p.integer("intermediate_size", "model.ffn_dim", true, 1);
  s.n_layers = p.integer("num_hidden_layers", "model.n_layers", true, 1);
  s.n_heads = p.integer("num_attention_heads", "model.n_heads", true, 1);
  s.n_kv_heads = p.integer("num_key_value_heads", "model.n_kv_heads", false, s.n_heads);
  if (!j.contains("num_key_value_heads"))
    p.mapping["num_key_value_heads"] = {{"default", s.n_heads}, {"became", "model.n_kv_heads"}};
  s.max_seq = p.integer("max_position_embeddings", "model.max_seq", true, 1);
  s.norm_eps = static_cast<float>(p.number("rms_norm_eps", "model.norm_eps", kDefaultRmsNormEps));
  s.rope_theta = p.number("rope_theta", "model.rope_theta", kDefaultRopeTheta);
  read_rope_parameters(p, s);
  s.init_std = static_cast<float>(p.number("initializer_range", "model.init_std", kDefaultInitializerRange));
  p.read.insert("tie_word_embeddings");
  p.record("tie_word_embeddings", "model.tie_embeddings", false);
  if (j.contains("tie_word_embeddings")) {
    if (j.at("tie_word_embeddings").is_boolean())
      s.tie_embeddings = j.at("tie_word_embeddings").get<bool>();
    else
      p.errs.push_back(
          fmt::format("\"tie_word_embeddings\" = {} must be true or false", j.at("tie_word_embeddings").dump()));
  }
  p.read.insert("head_dim");
  if (j.contains("head_dim")) {
    if (s.n_heads > 0 &&
        !(j.at("head_dim").is_number_integer() && j.at("head_dim").get<int64_t>() * s.n_heads == s.dim))
      p.errs.push_back(
          fmt::format("\"head_dim\" = {} is refused: the engine's head_dim is hidden_size / "
                      "num_attention_heads = {} / {}; a different head_dim changes the attention shapes",
                      j.at("head_dim").dump(), s.dim, s.n_heads));
    p.mapping["head_dim"] = {{"value", j.at("head_dim")}, {"checked", "equals hidden_size / num_attention_heads"}};
  }
}

// The keys that must hold their neutral value, and the architecture.
void check_neutral(HfPass& p) {
  const json& j = p.j;
  for (const Neutral& n : neutral_keys()) {
    p.read.insert(n.key);
    if (!j.contains(n.key)) continue;
    const json& v = j.at(n.key);
    const bool same = v.is_number() && n.value.is_number() ? v.get<double>() == n.value.get<double>() : v == n.value;
    if (!same)
      p.errs.push_back(
          fmt::format("\"{}\" = {} is refused: {} (only {} is supported)", n.key, v.dump(), n.why, n.value.dump()));
    p.mapping[n.key] = {{"value", v}, {"checked", fmt::format("the engine's math needs {}", n.value.dump())}};
  }
  if (j.contains("architectures")) {
    const json& a = j.at("architectures");
    if (!(a.is_array() && a.size() == 1 && a[0] == "LlamaForCausalLM"))
      p.errs.push_back(
          fmt::format("\"architectures\" = {} is refused: only [\"LlamaForCausalLM\"] is supported", a.dump()));
  }
}

// The model's rules name the engine's keys; say which key of the Hugging Face file each one is.
std::string in_hf_names(std::string m) {
  for (const auto& [ours, theirs] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"model.n_kv_heads", "num_key_value_heads"},
           {"model.n_heads", "num_attention_heads"},
           {"model.n_layers", "num_hidden_layers"},
           {"model.ffn_dim", "intermediate_size"},
           {"model.max_seq", "max_position_embeddings"},
           {"model.vocab_size", "vocab_size"},
           {"model.dim", "hidden_size"}})
    for (size_t at = m.find(ours); at != std::string::npos; at = m.find(ours, at + theirs.size() + 2))
      m.replace(at, ours.size(), fmt::format("\"{}\"", theirs));
  return m;
}

// Every other key: ignored with its reason, or refused as unknown.
void sort_other_keys(HfPass& p) {
  for (const auto& [key, value] : p.j.items()) {
    if (p.read.count(key)) continue;
    if (auto it = ignored_keys().find(key); it != ignored_keys().end()) {
      p.mapping[key] = {{"value", value}, {"ignored", it->second}};
      continue;
    }
    p.errs.push_back(
        fmt::format("unknown key {:?} = {}: shardproof does not know whether it changes the math, so "
                    "it refuses it",
                    key,
                    value.dump().substr(
                        0, 60)));  // {:?}: quoted, invisible bytes escaped  // {:?}: quoted, invisible bytes escaped
  }
}

}  // namespace

Result<HfModelConfig> hf_model_from_json(const json& j, const std::string& name, const std::string& origin) {
  if (!j.is_object())
    return invalid_argument("{}: a Hugging Face config must be a JSON object, got {}", origin, j.type_name());
  HfModelConfig out;
  out.name = name;
  HfPass p{.j = j, .mapping = out.mapping, .errs = {}, .read = {}};
  read_shape(p, out.model);
  check_neutral(p);
  sort_other_keys(p);
  if (p.errs.empty()) {
    if (Status v = out.model.validate(); !v.ok()) p.errs.push_back(in_hf_names(v.message()));
  }
  if (p.errs.empty()) return out;
  std::string msg = fmt::format("{}: not a LLaMA config shardproof can use ({} problem{}):", origin, p.errs.size(),
                                p.errs.size() == 1 ? "" : "s");
  for (const auto& e : p.errs) msg += "\n  - " + e;
  return Status(StatusCode::kInvalidArgument, msg,
                "docs/huggingface.md lists the keys read, the keys that must hold their neutral value and the keys "
                "ignored");
}

Result<HfModelConfig> read_hf_model_config(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return invalid_argument("model config '{}' does not exist", path).with_hint("check the path");
  if (!std::filesystem::is_regular_file(path, ec))
    return invalid_argument("model config '{}' is not a regular file", path)
        .with_hint("name the config.json file, not its directory");
  auto text = read_file(path, uint64_t{1} << 24);
  if (!text.ok()) return invalid_argument("{}", text.status().message());
  auto j = parse_json_strict(*text, path);
  if (!j.ok())
    return invalid_argument("{} is not valid JSON: {}", path, j.status().message())
        .with_hint("a Hugging Face config.json is one JSON object");
  std::string name = std::filesystem::path(path).parent_path().filename().string();
  if (name.empty()) name = std::filesystem::path(path).stem().string();
  SP_ASSIGN_OR_RETURN(HfModelConfig c, hf_model_from_json(*j, name, path));
  c.file = std::filesystem::absolute(path, ec).lexically_normal().string();
  c.sha256 = sha256_hex(*text);
  return c;
}

void apply_hf_model_config(json& run_config, const HfModelConfig& hf) {
  run_config["model"] = hf.model.to_json();
  run_config["data"]["vocab_size"] = hf.model.vocab_size;
  run_config["model_config"] = {{"file", hf.file}, {"sha256", hf.sha256}, {"mapping", hf.mapping}};
}

}  // namespace sp::config
