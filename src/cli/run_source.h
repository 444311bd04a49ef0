// Where a run's configuration comes from (docs/config.md): the preset or --config file, --model-config (a
// Hugging Face config.json for [model]), --deepspeed (a ds_config.json), then every --set, in that order;
// with --np where a command takes a world size, and --root for configs/ and data/. One struct and one
// registration serve every command that builds a run configuration (train, prove, compare, config show,
// ckpt import; plan and lab run take the part that applies to them), so the options' names, checks and
// meaning are written once; a command words only what differs in its own context (what --set applies to).
// Not the reading itself: that is config::load_run_config (config/run_sources.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cli/run_setup.h"
#include "config/run_config.h"
#include "core/status.h"

namespace sp::cli {

struct RunSource {
  std::string preset;             // configs/NAME.toml (empty: tiny, unless --config)
  std::string config;             // or a TOML file
  std::string model_config;       // [model] from a Hugging Face config.json (docs/huggingface.md)
  std::string deepspeed;          // a DeepSpeed ds_config.json (docs/deepspeed.md), mapped before the sets
  std::vector<std::string> sets;  // --set key=value overrides, in order
  int np = 0;                     // --np (NpOption says what it means); 0: not given
  std::string root;               // source root for configs/ and data/ (empty: default_root())

  std::string root_or_default() const;
  // The run configuration from every source, in order (load_run_config).
  Result<config::RunConfig> load(const config::DeepSpeedInput& deepspeed) const;
  // The options that hand this source to a `train` child (prove's stages, compare's runs): --config or
  // --preset as given, --model-config made absolute, every --set, and --deepspeed with the dp of its
  // batch rule (`deepspeed_dp`). --root is the caller's: it comes first on their command line.
  std::vector<std::string> train_args(int deepspeed_dp) const;
};

// What --np means to a command: absent; train's "start mpirun with N ranks"; or the launcher's world size
// (prove, config show: dp = N / (tp × pp) unless a --set gives dp).
enum class NpOption { kNone, kLaunch, kWorld };

// Which of the options a command registers, and the help of those whose wording depends on the command.
struct RunSourceOptions {
  bool files = true;         // --preset, --config (plan takes its model from --model instead)
  bool model_config = true;  // --model-config
  bool deepspeed = true;     // --deepspeed
  bool root = true;          // --root
  NpOption np = NpOption::kNone;
  std::string_view model_config_help =
      "The [model] from a Hugging Face LLaMA config.json, after --preset/--config and before --set "
      "(docs/huggingface.md)";
  std::string_view set_help = "Override a key: --set parallel.dp=4 (repeatable)";
  std::string_view deepspeed_help =
      "DeepSpeed ds_config.json, mapped after the preset/--config and before every --set (docs/deepspeed.md)";
  std::string_view root_help = "Repository root for configs/ and data/ (default: the source tree)";
  std::string_view np_help = {};  // empty: the meaning's own (NpOption)
};

// Registers the run-source options on `cmd`, bound to `source` (which must outlive the parse), in the
// order --preset, --config, --model-config, --set, --deepspeed, --np, --root.
void add_run_source_options(CLI::App* cmd, RunSource& source, const RunSourceOptions& options = {});

}  // namespace sp::cli
