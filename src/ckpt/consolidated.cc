#include "ckpt/consolidated.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "ckpt/format.h"
#include "ckpt/load.h"
#include "ckpt/reshard.h"
#include "ckpt/safetensors.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "model/weights.h"

namespace sp::ckpt {
namespace fs = std::filesystem;

namespace {
std::string config_json_beside(const std::string& weights_path) {
  return (fs::path(weights_path).parent_path() / "config.json").string();
}
}  // namespace

Result<ExportSummary> export_consolidated(const CheckpointPaths& paths, int64_t step, const std::string& out_path) {
  SP_ASSIGN_OR_RETURN(Manifest m, read_manifest(paths, step));
  SP_RETURN_IF_ERROR(verify_shard_files(paths.step_dir(step), m));
  SP_ASSIGN_OR_RETURN(const model::LlamaConfig config, m.model_config());
  SP_ASSIGN_OR_RETURN(CheckpointSource source, CheckpointSource::open(paths.step_dir(step), m, config));
  const std::vector<model::WeightSpec> table = model::weight_table(config);
  std::vector<std::vector<float>> data(table.size());  // (numel) per tensor, the file's memory
  SafetensorsWriter writer;
  for (size_t i = 0; i < table.size(); ++i) {
    data[i].resize(static_cast<size_t>(shape_numel(table[i].shape)));
    SP_RETURN_IF_ERROR(source.read_logical(table[i].name, StateKind::kParam, data[i].data()));
    writer.add(table[i].name, DType::kF32, table[i].shape, data[i].data());
  }
  writer.set_metadata("format", "pt");  // what transformers expects of a PyTorch-origin safetensors file
  writer.set_metadata("shardproof.source", fmt::format("{} step {}", paths.root(), step));
  writer.set_metadata("shardproof.manifest_digest", m.digest);
  const std::string out_dir = fs::path(out_path).parent_path().string();
  if (!out_dir.empty()) SP_RETURN_IF_ERROR(make_directories(out_dir));
  const std::string tmp = out_path + ".tmp";
  SP_RETURN_IF_ERROR(writer.write(tmp));
  if (std::rename(tmp.c_str(), out_path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return io_error("cannot rename '{}' to '{}'", tmp, out_path);
  }
  ExportSummary s;
  s.weights_path = out_path;
  s.config_path = config_json_beside(out_path);
  SP_RETURN_IF_ERROR(write_file_atomic(s.config_path, config.to_hf_json().dump(2) + "\n"));
  s.step = step;
  s.tensors = table.size();
  s.bytes = writer.file_size();
  return s;
}

Result<NamedTensors> read_consolidated(const std::string& path, const model::LlamaConfig& config) {
  const std::string cfg_path = config_json_beside(path);
  if (path_exists(cfg_path)) {
    SP_ASSIGN_OR_RETURN(const std::string text, read_file(cfg_path, 1 << 20));
    SP_ASSIGN_OR_RETURN(const nlohmann::json cfg, parse_json_strict(text, cfg_path, 16));
    const nlohmann::json want = config.to_hf_json();
    for (const char* key :
         {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
          "num_key_value_heads", "tie_word_embeddings", "rope_theta", "rms_norm_eps"}) {
      if (!cfg.is_object() || !cfg.contains(key)) continue;
      const nlohmann::json& a = cfg[key];
      const nlohmann::json& b = want[key];
      const bool same = a.is_number() && b.is_number()
                            ? std::fabs(a.get<double>() - b.get<double>()) <= 1e-6 * std::fabs(b.get<double>())
                            : a == b;
      if (!same)
        return failed_precondition("'{}': {} is {} in the weights' config but {} in this run's model", cfg_path, key,
                                   a.dump(), b.dump())
            .with_hint("train with the model configuration the weights were made for");
    }
  }
  SP_ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::open(path));
  NamedTensors out;
  for (const model::WeightSpec& spec : model::weight_table(config)) {
    std::vector<float> v(static_cast<size_t>(shape_numel(spec.shape)));
    SP_RETURN_IF_ERROR(reader.read_f32(spec.name, spec.shape, v.data()));
    for (size_t i = 0; i < v.size(); ++i)
      if (!std::isfinite(v[i]))
        return corrupt("weights '{}': tensor '{}' holds a non-finite value ({}) at element {}", path, spec.name, v[i],
                       i);
    out.emplace(spec.name, std::move(v));
  }
  for (const SafetensorsEntry& e : reader.tensors())
    if (!out.count(e.name))
      return failed_precondition("weights '{}' hold tensor {:?}, which this model configuration does not have", path,
                                 e.name)
          .with_hint("the weights were made for a different model configuration");
  return out;
}

}  // namespace sp::ckpt
