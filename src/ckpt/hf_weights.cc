#include "ckpt/hf_weights.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "ckpt/hf_layout.h"
#include "ckpt/load.h"
#include "ckpt/reshard.h"
#include "ckpt/safetensors.h"
#include "core/check.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "model/weights.h"
#include "tensor/float16.h"

namespace sp::ckpt {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxListed = 12;  // problems listed in one message; the rest are counted

std::string problem_list(const std::vector<std::string>& problems) {
  std::string s;
  for (size_t i = 0; i < problems.size() && i < kMaxListed; ++i) s += "\n  - " + problems[i];
  if (problems.size() > kMaxListed) s += fmt::format("\n  - ... and {} more", problems.size() - kMaxListed);
  return s;
}

bool readable_dtype(DType t) { return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16; }

// One tensor as found in the files: readers[reader].tensors()[entry] (positions, so the table survives a move).
struct Found {
  size_t reader = 0;
  size_t entry = 0;
};

// The readers of every file and where each tensor is; checks the index's rules against the files.
struct OpenWeights {
  std::vector<SafetensorsReader> readers;
  std::map<std::string, Found> tensors;
  uint64_t tensor_bytes = 0;
  std::vector<std::string> problems;  // the index against its shards (reported with the model's, read_checked)
  const SafetensorsReader& reader(const Found& f) const { return readers[f.reader]; }
  const SafetensorsEntry& entry(const Found& f) const { return readers[f.reader].tensors()[f.entry]; }
  std::string file(const Found& f) const { return fs::path(readers[f.reader].label()).filename().string(); }
};

Result<OpenWeights> open_weights(const HfWeightFiles& files) {
  OpenWeights w;
  std::optional<HfIndex> index;
  if (!files.index.empty()) {
    SP_ASSIGN_OR_RETURN(const nlohmann::json j, read_json_file(files.index, uint64_t{1} << 26));
    SP_ASSIGN_OR_RETURN(index, parse_hf_index(j, files.index));
    for (const std::string& f : index->files()) {
      const std::string full = (fs::path(files.dir) / f).string();
      if (!path_exists(full)) {
        std::string example;
        for (const auto& [t, file] : index->weight_map)
          if (file == f) {
            example = t;
            break;
          }
        std::error_code ec;
        const bool link = fs::is_symlink(fs::symlink_status(full, ec));
        return not_found(
                   "index '{}' names shard '{}' (e.g. for tensor '{}'), which {}", files.index, f, example,
                   link ? "is a symbolic link that leads to no file (a loop, or a missing target)" : "does not exist")
            .with_hint(link ? "replace the link with the shard itself"
                            : "copy every shard the index names into " + files.dir);
      }
    }
  }
  for (const std::string& f : files.files) {
    SP_ASSIGN_OR_RETURN(SafetensorsReader r, SafetensorsReader::open(f));
    w.readers.push_back(std::move(r));
  }
  std::vector<std::string>& problems = w.problems;
  for (size_t ri = 0; ri < w.readers.size(); ++ri) {
    const std::string file = fs::path(w.readers[ri].label()).filename().string();
    const std::vector<SafetensorsEntry>& entries = w.readers[ri].tensors();
    for (size_t ei = 0; ei < entries.size(); ++ei) {
      const SafetensorsEntry& e = entries[ei];
      w.tensor_bytes += e.nbytes();
      auto [it, fresh] = w.tensors.emplace(e.name, Found{ri, ei});
      if (!fresh) {
        problems.push_back(
            fmt::format("tensor '{}' is stored twice: in '{}' and in '{}'", e.name, w.file(it->second), file));
        continue;
      }
      if (!index) continue;
      auto m = index->weight_map.find(e.name);
      if (m == index->weight_map.end())
        problems.push_back(fmt::format("shard '{}' holds tensor '{}', which the index does not list", file, e.name));
      else if (m->second != file)
        problems.push_back(
            fmt::format("shard '{}' holds tensor '{}', which the index maps to '{}'", file, e.name, m->second));
    }
  }
  if (index) {
    for (const auto& [tensor, file] : index->weight_map) {
      auto it = w.tensors.find(tensor);
      if (it == w.tensors.end())
        problems.push_back(fmt::format("the index maps tensor '{}' to '{}', which does not hold it", tensor, file));
    }
    if (index->total_size && *index->total_size != w.tensor_bytes)
      problems.push_back(fmt::format("metadata.total_size is {} bytes but the shards' tensors hold {} bytes",
                                     *index->total_size, w.tensor_bytes));
  }
  return w;
}

// Every tensor of the model present once with its shape and a readable dtype, no other: all problems at once.
Status check_against_model(const OpenWeights& w, const std::vector<model::WeightSpec>& table,
                           const std::string& label) {
  std::vector<std::string> problems;
  std::set<std::string> wanted;
  for (const model::WeightSpec& spec : table) {
    wanted.insert(spec.name);
    auto it = w.tensors.find(spec.name);
    if (it == w.tensors.end()) {
      problems.push_back(fmt::format("missing tensor '{}' {}", spec.name, shape_string(spec.shape)));
      continue;
    }
    const SafetensorsEntry& e = w.entry(it->second);
    const std::string file = w.file(it->second);
    if (e.shape != spec.shape)
      problems.push_back(fmt::format("tensor '{}' has shape {} in '{}' but the model needs {}", spec.name,
                                     shape_string(e.shape), file, shape_string(spec.shape)));
    if (!readable_dtype(e.dtype))
      problems.push_back(fmt::format("tensor '{}' in '{}' is {}; only F32, BF16 and F16 widen exactly to fp32",
                                     spec.name, file, dtype_name(e.dtype)));
  }
  bool inv_freq = false;
  for (const auto& [name, found] : w.tensors)
    if (!wanted.count(name)) {
      problems.push_back(fmt::format("extra tensor '{}' {} in '{}': the model has no such tensor", name,
                                     shape_string(w.entry(found).shape), w.file(found)));
      inv_freq = inv_freq || name.ends_with("rotary_emb.inv_freq");
    }
  if (problems.empty()) return Status();
  std::string hint =
      "the weights were made for another model: give its config.json with --model-config, or a model "
      "configuration with these shapes";
  if (inv_freq) hint += "; rotary_emb.inv_freq buffers (transformers < 4.31) are computed, not weights: drop them";
  return invalid_argument("weights '{}' do not fit this model ({} problem{}):{}", label, problems.size(),
                          problems.size() == 1 ? "" : "s", problem_list(problems))
      .with_hint(hint);
}

// A config.json beside the weights describes them: it must agree with the run's model where the math is
// shaped (absent keys: transformers' LlamaConfig defaults).
Status check_config_beside(const std::string& dir, const model::LlamaConfig& config) {
  const std::string path = (fs::path(dir) / kHfConfigFile).string();
  if (!path_exists(path)) return Status();
  SP_ASSIGN_OR_RETURN(const nlohmann::json cfg, read_json_file(path, uint64_t{1} << 24));
  if (!cfg.is_object()) return invalid_argument("'{}' must be a JSON object", path);
  const nlohmann::json want = config.to_hf_json();
  const std::map<std::string, nlohmann::json> defaults = {
      {"num_key_value_heads", cfg.contains("num_attention_heads") ? cfg.at("num_attention_heads") : nlohmann::json()},
      {"tie_word_embeddings", false},
      {"rope_theta", 10000.0},
      {"rms_norm_eps", 1e-6}};
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "tie_word_embeddings", "rope_theta", "rms_norm_eps"}) {
    nlohmann::json a = cfg.contains(key) ? cfg.at(key) : defaults.count(key) ? defaults.at(key) : nlohmann::json();
    const nlohmann::json& b = want.at(key);
    bool same = a == b;
    if (a.is_number() && b.is_number())
      same = std::string(key) == "rms_norm_eps" ? static_cast<float>(a.get<double>()) == config.norm_eps
                                                : a.get<double>() == b.get<double>();
    if (!same)
      return invalid_argument("'{}' says {} = {} but this run's model has {}", path, key,
                              a.is_null() ? "(absent)" : a.dump(), b.dump())
          .with_hint(fmt::format("train with --model-config {} (the model the weights were made for)", path));
  }
  return Status();
}

Status widen(const SafetensorsReader& r, const SafetensorsEntry& e, float* dst) {
  if (e.dtype == DType::kF32) return r.read(e, dst);
  std::vector<uint16_t> raw(e.nbytes() / 2);
  SP_RETURN_IF_ERROR(r.read(e, raw.data()));
  f32_from_float16(dst, raw.data(), static_cast<int64_t>(raw.size()), e.dtype);
  return Status();
}

Result<NamedTensors> read_checked(const std::string& path, const model::LlamaConfig& config, HfWeightsInfo* info) {
  SP_ASSIGN_OR_RETURN(const HfWeightFiles files, locate_hf_weights(path));
  SP_ASSIGN_OR_RETURN(const OpenWeights w, open_weights(files));
  const std::vector<model::WeightSpec> table = model::weight_table(config);
  const Status fits = check_against_model(w, table, path);
  if (!w.problems.empty())  // with what the model misses: a total_size off by a tensor names that tensor too
    return corrupt("index '{}' and its shards disagree ({} problem{}):{}{}", files.index, w.problems.size(),
                   w.problems.size() == 1 ? "" : "s", problem_list(w.problems),
                   fits.ok() ? std::string() : "\n  and " + fits.message())
        .with_hint("the directory must hold the shards the index was written with (docs/formats/huggingface.md)");
  SP_RETURN_IF_ERROR(fits);
  SP_RETURN_IF_ERROR(check_config_beside(files.dir, config));
  NamedTensors out;
  for (const model::WeightSpec& spec : table) {
    const Found& f = w.tensors.at(spec.name);
    std::vector<float> v(static_cast<size_t>(shape_numel(spec.shape)));
    SP_RETURN_IF_ERROR(widen(w.reader(f), w.entry(f), v.data()));
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        return corrupt("weights '{}': tensor '{}' holds a non-finite value ({}) at element {}", w.reader(f).label(),
                       spec.name, v[i], i)
            .with_hint("training cannot start from non-finite weights");
    if (info) info->dtypes[spec.name] = w.entry(f).dtype;
    out.emplace(spec.name, std::move(v));
  }
  if (info) {
    info->files = files;
    info->tensor_bytes = w.tensor_bytes;
  }
  return out;
}

}  // namespace

Result<HfWeightFiles> locate_hf_weights(const std::string& path) {
  std::error_code ec;
  HfWeightFiles f;
  if (!fs::exists(path, ec)) return not_found("weights '{}' do not exist", path).with_hint("check the path");
  std::string index, single;
  if (fs::is_directory(path, ec)) {
    f.dir = path;
    const std::string i = (fs::path(path) / kHfIndexFile).string(), s = (fs::path(path) / kHfSingleFile).string();
    const bool has_index = path_exists(i), has_single = path_exists(s);
    if (has_index && has_single)
      return invalid_argument("'{}' holds both {} and {}: which are the weights is ambiguous", path, kHfSingleFile,
                              kHfIndexFile)
          .with_hint("name the file to read, or remove the other");
    if (!has_index && !has_single)
      return not_found("'{}' holds neither {} nor {}", path, kHfSingleFile, kHfIndexFile)
          .with_hint("a Hugging Face model directory holds one of them (docs/formats/huggingface.md)");
    (has_index ? index : single) = has_index ? i : s;
  } else if (path.ends_with(".json")) {
    index = path;
  } else {
    single = path;
  }
  if (!index.empty()) {
    f.index = index;
    f.dir = fs::path(index).parent_path().string();
    if (f.dir.empty()) f.dir = ".";
    SP_ASSIGN_OR_RETURN(const nlohmann::json j, read_json_file(index, uint64_t{1} << 26));
    SP_ASSIGN_OR_RETURN(const HfIndex parsed, parse_hf_index(j, index));
    for (const std::string& file : parsed.files()) f.files.push_back((fs::path(f.dir) / file).string());
    return f;
  }
  f.dir = fs::path(single).parent_path().string();
  if (f.dir.empty()) f.dir = ".";
  f.files = {single};
  return f;
}

Result<NamedTensors> read_hf_weights(const std::string& path, const model::LlamaConfig& config, HfWeightsInfo* info) {
  auto r = read_checked(path, config, info);
  // A file named on the command line that cannot be used is a usage error (exit 2), whatever is wrong with it;
  // an operating-system failure to read it stays one.
  if (!r.ok() && r.status().code() != StatusCode::kIo)
    return Status(StatusCode::kInvalidArgument, r.status().message(), r.status().hint());
  return r;
}

}  // namespace sp::ckpt
