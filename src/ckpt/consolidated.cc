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

}  // namespace sp::ckpt
