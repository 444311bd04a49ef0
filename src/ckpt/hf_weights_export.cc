// Writing Hugging Face weights: an export directory (config.json, safetensors shards, the index) written to a
// temporary directory and renamed onto --out; reading them is hf_weights.cc.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include "ckpt/hf_layout.h"
#include "ckpt/hf_weights.h"
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

// A name an HF export writes (write_hf_weights): config.json, model.safetensors, the index, its shards.
bool is_hf_export_name(const std::string& name) {
  if (name == kHfConfigFile || name == kHfSingleFile || name == kHfIndexFile) return true;
  int index = 0, count = 0;
  char tail[2] = {};
  return std::sscanf(name.c_str(), "model-%5d-of-%5d.safetensor%1s", &index, &count, tail) == 3 && tail[0] == 's' &&
         hf_shard_file_name(index, count) == name;
}

// The directory `out_dir` may be written: absent, empty, or (with overwrite) a previous HF export, replaced:
// --overwrite never deletes what an export did not write (a run, a proof bundle, anything else).
Status check_out_dir(const std::string& out_dir, bool overwrite) {
  std::error_code ec;
  if (!fs::exists(out_dir, ec)) return Status();
  if (fs::is_symlink(out_dir, ec))
    return invalid_argument("--hf '{}' is a symbolic link: an export replaces a directory, never a link's target",
                            out_dir)
        .with_hint("pass the directory itself, or choose a new one");
  if (!fs::is_directory(out_dir, ec))
    return invalid_argument("--hf '{}' exists and is not a directory", out_dir).with_hint("choose a new directory");
  if (fs::is_empty(out_dir, ec)) return Status();
  if (!overwrite)
    return invalid_argument("--hf '{}' exists and is not empty: an export never replaces files unasked", out_dir)
        .with_hint("choose a new directory, or pass --overwrite to replace a previous export");
  std::vector<std::string> foreign;
  for (const fs::directory_entry& e : fs::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!is_hf_export_name(name) || !e.is_regular_file(ec)) foreign.push_back(name);
  }
  if (ec) return io_error("cannot list '{}': {}", out_dir, ec.message());
  if (foreign.empty()) return Status();
  std::sort(foreign.begin(), foreign.end());
  return invalid_argument(
             "--hf '{}' --overwrite: the directory holds {} an HF export does not write ('{}'{}): --overwrite "
             "replaces only a previous export (config.json, model.safetensors or its shards and index)",
             out_dir, foreign.size() == 1 ? "an entry" : fmt::format("{} entries", foreign.size()), foreign.front(),
             foreign.size() > 1 ? ", …" : "")
      .with_hint("choose a new directory: nothing was removed");
}

// The tmp directory, renamed onto `out_dir` (an old one moved aside first and removed after).
Status commit_dir(const std::string& tmp, const std::string& out_dir) {
  std::error_code ec;
  SP_RETURN_IF_ERROR(fsync_directory(tmp));
  const std::string old = tmp + ".old";
  const bool replace = fs::exists(out_dir, ec) && !fs::is_empty(out_dir, ec);
  if (fs::exists(out_dir, ec) && !replace) fs::remove(out_dir, ec);  // an empty directory
  if (replace) {
    fs::rename(out_dir, old, ec);
    if (ec) return io_error("cannot move '{}' aside to '{}': {}", out_dir, old, ec.message());
  }
  fs::rename(tmp, out_dir, ec);
  if (ec) return io_error("cannot rename '{}' to '{}': {}", tmp, out_dir, ec.message());
  if (replace) fs::remove_all(old, ec);
  const std::string parent = fs::absolute(out_dir).parent_path().string();
  return fsync_directory(parent);
}

}  // namespace

Result<HfExportSummary> write_hf_weights(const std::string& out_dir, const model::LlamaConfig& config,
                                         const std::function<const float*(const std::string&)>& tensor,
                                         const HfExportOptions& options) {
  SP_CHECK(options.dtype == DType::kF32 || options.dtype == DType::kBF16, "HF export dtype {} is not F32 or BF16",
           dtype_name(options.dtype));
  SP_RETURN_IF_ERROR(check_out_dir(out_dir, options.overwrite));
  const std::vector<model::WeightSpec> table = model::weight_table(config);
  std::vector<uint64_t> bytes;
  for (const model::WeightSpec& w : table)
    bytes.push_back(static_cast<uint64_t>(shape_numel(w.shape)) * dtype_size(options.dtype));
  const std::vector<std::vector<size_t>> shards = plan_hf_shards(bytes, options.max_shard_bytes);
  // Every value must read back: finite, and finite after rounding to the export dtype.
  for (const model::WeightSpec& w : table) {
    const float* v = tensor(w.name);
    SP_CHECK(v != nullptr, "no values for tensor {}", w.name);
    for (int64_t i = 0; i < shape_numel(w.shape); ++i) {
      const float x = options.dtype == DType::kBF16 ? f32_from_bf16(bf16_from_f32(v[i])) : v[i];
      if (!std::isfinite(x))
        return failed_precondition("tensor '{}' element {} is {} in {}: the export could never be loaded", w.name, i, x,
                                   dtype_name(options.dtype));
    }
  }
  const fs::path target = fs::absolute(out_dir).lexically_normal();
  const std::string tmp =
      (target.parent_path() / fmt::format(".{}.tmp-{}", target.filename().string(), ::getpid())).string();
  std::error_code ec;
  fs::remove_all(tmp, ec);
  SP_RETURN_IF_ERROR(make_directories(tmp));
  auto fail = [&](Status s) {
    fs::remove_all(tmp, ec);
    return s;
  };
  HfExportSummary out;
  out.out_dir = out_dir;
  out.tensors = table.size();
  HfIndex index;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string name = shards.size() == 1
                                 ? std::string(kHfSingleFile)
                                 : hf_shard_file_name(static_cast<int>(s) + 1, static_cast<int>(shards.size()));
    std::vector<std::vector<uint16_t>> narrow;  // this shard's bf16 copies
    narrow.reserve(shards[s].size());
    SafetensorsWriter writer;
    writer.set_metadata("format", "pt");  // what transformers expects of a PyTorch-origin safetensors file
    for (size_t i : shards[s]) {
      const model::WeightSpec& w = table[i];
      const float* v = tensor(w.name);
      if (options.dtype == DType::kBF16) {
        narrow.emplace_back(static_cast<size_t>(shape_numel(w.shape)));
        float16_from_f32(narrow.back().data(), v, shape_numel(w.shape), DType::kBF16);
        writer.add(w.name, DType::kBF16, w.shape, narrow.back().data());
      } else {
        writer.add(w.name, DType::kF32, w.shape, v);
      }
      index.weight_map[w.name] = name;
      out.tensor_bytes += bytes[i];
    }
    if (Status st = writer.write((fs::path(tmp) / name).string()); !st.ok()) return fail(st);
    out.files.push_back(name);
  }
  if (shards.size() > 1) {
    index.total_size = out.tensor_bytes;
    if (Status st = write_file((fs::path(tmp) / kHfIndexFile).string(), hf_index_text(index)); !st.ok())
      return fail(st);
    out.files.push_back(std::string(kHfIndexFile));
  }
  const std::string dtype_label = options.dtype == DType::kBF16 ? "bfloat16" : "float32";
  if (Status st = write_file((fs::path(tmp) / kHfConfigFile).string(), config.to_hf_json(dtype_label).dump(2) + "\n");
      !st.ok())
    return fail(st);
  out.files.insert(out.files.begin(), std::string(kHfConfigFile));
  if (Status st = commit_dir(tmp, out_dir); !st.ok()) return fail(st);
  return out;
}

Result<HfExportSummary> export_hf(const CheckpointPaths& paths, int64_t step, const std::string& out_dir,
                                  const HfExportOptions& options) {
  SP_ASSIGN_OR_RETURN(Manifest m, read_manifest(paths, step));
  SP_RETURN_IF_ERROR(verify_shard_files(paths.step_dir(step), m));
  SP_ASSIGN_OR_RETURN(const model::LlamaConfig config, m.model_config());
  SP_RETURN_IF_ERROR(check_out_dir(out_dir, options.overwrite));  // before the tensors are assembled
  SP_ASSIGN_OR_RETURN(CheckpointSource source, CheckpointSource::open(paths.step_dir(step), m, config));
  NamedTensors values;
  for (const model::WeightSpec& w : model::weight_table(config)) {
    std::vector<float>& v = values[w.name];
    v.resize(static_cast<size_t>(shape_numel(w.shape)));
    SP_RETURN_IF_ERROR(source.read_logical(w.name, StateKind::kParam, v.data()));
  }
  SP_ASSIGN_OR_RETURN(HfExportSummary s,
                      write_hf_weights(
                          out_dir, config, [&](const std::string& n) { return values.at(n).data(); }, options));
  s.step = step;
  return s;
}

}  // namespace sp::ckpt
