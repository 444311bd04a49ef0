#include "cli/run_source.h"

#include <filesystem>

namespace sp::cli {

std::string RunSource::root_or_default() const { return root.empty() ? default_root() : root; }

Result<config::RunConfig> RunSource::load(const config::DeepSpeedInput& deepspeed_input) const {
  return config::load_run_config(root_or_default(), preset, config, model_config, sets, deepspeed_input);
}

std::vector<std::string> RunSource::train_args(int deepspeed_dp) const {
  std::vector<std::string> args;
  if (!config.empty()) args.insert(args.end(), {"--config", config});
  if (!preset.empty()) args.insert(args.end(), {"--preset", preset});
  if (!model_config.empty())
    args.insert(args.end(), {"--model-config", std::filesystem::absolute(model_config).lexically_normal().string()});
  for (const std::string& s : sets) args.insert(args.end(), {"--set", s});
  if (!deepspeed.empty())
    args.insert(args.end(), {"--deepspeed", deepspeed, "--deepspeed-dp", std::to_string(deepspeed_dp)});
  return args;
}

namespace {

// train's --np: a launcher's rank count, refused with the fix when it is not a whole number ≥ 1.
std::string launch_ranks(const std::string& v) {
  return !v.empty() && v.size() < 7 && v.find_first_not_of("0123456789") == std::string::npos && std::stoi(v) >= 1
             ? ""
             : "the number of MPI ranks must be a whole number ≥ 1, got '" + v + "' (under mpirun, drop --np)";
}

}  // namespace

void add_run_source_options(CLI::App* cmd, RunSource& source, const RunSourceOptions& options) {
  if (options.files) {
    cmd->add_option("--preset", source.preset, "Preset in configs/ (default: tiny)");
    cmd->add_option("--config", source.config, "Run configuration file (TOML)");
  }
  if (options.model_config)
    cmd->add_option("--model-config", source.model_config, std::string(options.model_config_help));
  cmd->add_option("--set", source.sets, std::string(options.set_help));
  if (options.deepspeed) cmd->add_option("--deepspeed", source.deepspeed, std::string(options.deepspeed_help));
  const auto np_help = [&](std::string_view own) {
    return std::string(options.np_help.empty() ? own : options.np_help);
  };
  if (options.np == NpOption::kLaunch)
    cmd->add_option("--np", source.np, np_help("Start mpirun with this many ranks (instead of running under mpirun)"))
        ->check(launch_ranks);
  if (options.np == NpOption::kWorld)
    cmd->add_option("--np", source.np,
                    np_help("World size, as a launcher gives it: dp = NP / (tp × pp) unless --set gives dp"))
        ->check(CLI::PositiveNumber);
  if (options.root) cmd->add_option("--root", source.root, std::string(options.root_help));
}

}  // namespace sp::cli
