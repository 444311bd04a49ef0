// A run configuration from every source a command names, in the order they apply (docs/config.md): the preset
// (`root`/configs/NAME.toml) or a TOML file, a Hugging Face config.json replacing [model], a DeepSpeed
// ds_config.json mapped key by key, then every --set override. Not the reading of one source: run_config.h
// (TOML, --set), hf_config.h, ds_config.h. Invariant: later sources win, so a --set always has the last word.
#pragma once

#include <string>
#include <vector>

#include "config/run_config.h"
#include "core/status.h"

namespace sp::config {

// --preset NAME (configs/NAME.toml under root) or --config FILE, then every --set in order.
Result<RunConfig> load_run_config(const std::string& root, const std::string& preset, const std::string& config_file,
                                  const std::vector<std::string>& sets);
// --deepspeed FILE (docs/deepspeed.md): a ds_config.json mapped after the preset or --config and before every
// --set, so --set still wins; its SHA-256 and per-key mapping are kept in RunConfig::deepspeed.
struct DeepSpeedInput {
  std::string file;  // empty: no --deepspeed
  int rule_dp = 0;   // dp of DeepSpeed's batch rule; 0: the run's parallel.dp after every --set
  int world = 0;     // the launcher's world size; > 0: parallel.dp = world / (tp × pp) unless a --set gives it
                     // (also without a file: prove --np)
};
// Every source of a run configuration, in the order they apply: the preset or --config, --model-config
// FILE (a Hugging Face config.json, config/hf_config.h; empty: none) replacing [model], --deepspeed, then
// every --set.
Result<RunConfig> load_run_config(const std::string& root, const std::string& preset, const std::string& config_file,
                                  const std::string& model_config, const std::vector<std::string>& sets,
                                  const DeepSpeedInput& deepspeed);
}  // namespace sp::config
