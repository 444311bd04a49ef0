// A run configuration from its sources, in the order they apply (docs/config.md): a preset under a root's
// configs/ or a TOML file, a Hugging Face config.json for [model], a DeepSpeed ds_config.json, then every --set.
#include "config/run_sources.h"

#include <algorithm>
#include <filesystem>

#include "config/ds_config.h"
#include "config/hf_config.h"
#include "core/hash.h"

namespace sp::config {

Result<RunConfig> load_run_config(const std::string& root, const std::string& preset, const std::string& config_file,
                                  const std::vector<std::string>& sets) {
  return load_run_config(root, preset, config_file, "", sets, DeepSpeedInput{});
}

namespace {
// parallel.<key> of a configuration JSON, 1 when absent or not an integer (from_json reports that).
int axis_of(const nlohmann::json& j, const char* key) {
  if (!j.contains("parallel") || !j["parallel"].is_object() || !j["parallel"].contains(key)) return 1;
  const auto& v = j["parallel"][key];
  return v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= (1 << 20) ? v.get<int>() : 1;
}

// DeepSpeed's dp: the launcher's world over the model-parallel axes tp × pp (after every --set), unless a
// --set gives parallel.dp; then the ds_config mapped onto `j` (the preset's or --config's JSON) with its
// provenance in j["deepspeed"].
Status apply_deepspeed(const DeepSpeedInput& in, const std::vector<std::string>& sets, nlohmann::json& j) {
  nlohmann::json probe = j;  // the topology the run will have, after every --set
  for (const std::string& s : sets) SP_RETURN_IF_ERROR(apply_override(probe, s));
  int dp = axis_of(probe, "dp");
  const bool set_dp =
      std::any_of(sets.begin(), sets.end(), [](const std::string& s) { return s.rfind("parallel.dp=", 0) == 0; });
  if (in.world > 0 && !set_dp) {
    const int mp = axis_of(probe, "tp") * axis_of(probe, "pp");
    if (in.world % mp != 0)
      return invalid_argument("world size {} is not a multiple of tp × pp = {}", in.world, mp)
          .with_hint("launch a multiple of tp × pp ranks, or give parallel.dp with --set");
    dp = in.world / mp;
    j["parallel"]["dp"] = dp;
  }
  if (in.file.empty()) return Status();
  SP_ASSIGN_OR_RETURN(const nlohmann::json ds, read_ds_config(in.file));
  auto mapping = apply_ds_config(ds, in.rule_dp > 0 ? in.rule_dp : dp, j);
  if (!mapping.ok())
    return Status(mapping.status().code(), "--deepspeed '" + in.file + "': " + mapping.status().message(),
                  mapping.status().hint());
  SP_ASSIGN_OR_RETURN(const std::string sha, sha256_file(in.file));
  // The file's name, not its path: a resume or a later stage may name the same bytes from another directory.
  j["deepspeed"] = {
      {"file", std::filesystem::path(in.file).filename().string()}, {"sha256", sha}, {"mapping", mapping->to_json()}};
  return Status();
}
}  // namespace

Result<RunConfig> load_run_config(const std::string& root, const std::string& preset, const std::string& config_file,
                                  const std::string& model_config, const std::vector<std::string>& sets,
                                  const DeepSpeedInput& deepspeed) {
  nlohmann::json j;
  if (!preset.empty() && !config_file.empty())
    return invalid_argument("--preset and --config are mutually exclusive").with_hint("pass one of them");
  if (!config_file.empty()) {
    SP_ASSIGN_OR_RETURN(j, read_toml(config_file));
  } else {
    SP_ASSIGN_OR_RETURN(j, read_preset(root + "/configs", preset.empty() ? "tiny" : preset));
  }
  if (!model_config.empty()) {
    SP_ASSIGN_OR_RETURN(const HfModelConfig hf, read_hf_model_config(model_config));
    apply_hf_model_config(j, hf);
  }
  if (!deepspeed.file.empty() || deepspeed.world > 0) SP_RETURN_IF_ERROR(apply_deepspeed(deepspeed, sets, j));
  for (const std::string& s : sets) SP_RETURN_IF_ERROR(apply_override(j, s));
  return RunConfig::from_json(j);
}

}  // namespace sp::config
