// `shardproof config show`: the effective run configuration (preset or --config, --model-config, --deepspeed,
// then every --set) and, per ds_config key, what it became (docs/deepspeed.md). It runs nothing and writes
// nothing; its errors are the ones `train` would give for the same flags, exit 2.
#include <fmt/format.h>

#include <memory>
#include <regex>

#include "cli/command.h"
#include "cli/run_setup.h"
#include "cli/run_source.h"
#include "core/file_io.h"
#include "parallel/trainer.h"

namespace sp::cli {
namespace {

struct ConfigShowOpts {
  RunSource source;  // np: the launcher's world size
  bool json = false;
};

// A JSON scalar as TOML writes it.
std::string toml_value(const nlohmann::json& v) {
  if (v.is_number_float()) return fmt::format("{}", v.get<double>());
  return v.dump();
}

// The outcome with what a later --set made of its key: "train.lr = 0.003" becomes
// "train.lr = 0.003, then --set: 0.001" when the effective configuration holds another value.
std::string with_sets(std::string outcome, const nlohmann::json& config) {
  static const std::regex kAssignment(R"(^(\(absent[^)]*\) )?([a-z_0-9]+)\.([a-z_0-9]+) = )");
  std::smatch m;
  if (!std::regex_search(outcome, m, kAssignment)) return outcome;
  const std::string section = m[2].str(), key = m[3].str();
  if (!config.contains(section) || !config[section].is_object() || !config[section].contains(key)) return outcome;
  const std::string rest = outcome.substr(m[0].length());
  const std::string now = toml_value(config[section][key]);
  if (rest.rfind(now, 0) == 0) return outcome;  // unchanged
  return outcome + ", then --set: " + section + "." + key + " = " + now;
}

int run_config_show(const ConfigShowOpts& options) {
  const RunSource& o = options.source;
  if (!o.deepspeed.empty())
    if (Status s = check_input_file("--deepspeed", o.deepspeed); !s.ok()) return report_status(s);
  auto config = o.load(config::DeepSpeedInput{.file = o.deepspeed, .world = o.np});
  if (!config.ok()) return report_status(config.status());
  // What `train` would say of it (exit 2 after the configuration is shown: never a silent exit 0).
  const int world = o.np > 0 ? o.np : config->parallel.world();
  const auto planned = parallel::plan_run(*config, world);
  nlohmann::json j = config->to_json();
  const nlohmann::json deepspeed = j.contains("deepspeed") ? j["deepspeed"] : nlohmann::json();
  const nlohmann::json model_config = j.contains("model_config") ? j["model_config"] : nlohmann::json();
  j.erase("deepspeed");
  j.erase("model_config");
  const auto verdict = [&] {
    if (planned.ok()) return 0;
    return report_status(Status(planned.status().code(),
                                fmt::format("`train` refuses this configuration (on {} rank{}): {}", world,
                                            world == 1 ? "" : "s", planned.status().message()),
                                planned.status().hint()));
  };
  if (options.json) {
    std::printf(
        "%s\n",
        nlohmann::json{{"config", j}, {"deepspeed", deepspeed}, {"model_config", model_config}}.dump(2).c_str());
    return verdict();
  }
  std::printf("# effective configuration (%s%s%s%s)\n",
              o.config.empty() ? ("preset " + config->name).c_str() : o.config.c_str(),
              o.model_config.empty() ? "" : (", [model] from --model-config " + o.model_config).c_str(),
              o.deepspeed.empty() ? "" : (", --deepspeed " + o.deepspeed).c_str(),
              o.sets.empty() ? "" : fmt::format(", {} --set", o.sets.size()).c_str());
  std::printf("name = %s\n", j["name"].dump().c_str());
  for (const auto& [section, table] : j.items()) {
    if (!table.is_object()) continue;
    std::printf("\n[%s]\n", section.c_str());
    for (const auto& [k, v] : table.items()) std::printf("%s = %s\n", k.c_str(), toml_value(v).c_str());
  }
  if (deepspeed.is_null()) return verdict();
  const nlohmann::json& m = deepspeed["mapping"];
  std::printf("\n# --deepspeed %s (sha256 %s)\n", deepspeed["file"].get<std::string>().c_str(),
              deepspeed["sha256"].get<std::string>().c_str());
  std::printf("# batch: train_batch_size %lld = micro %lld × accumulation %lld × dp %d\n",
              static_cast<long long>(m["train_batch_size"].get<int64_t>()),
              static_cast<long long>(m["micro_batch"].get<int64_t>()),
              static_cast<long long>(m["gradient_accumulation_steps"].get<int64_t>()), m["dp"].get<int>());
  for (const auto& k : m["keys"]) {
    const std::string key = k["key"].get<std::string>(), outcome = k["outcome"].get<std::string>();
    if (k["kind"] == "mapped")
      std::printf("  %-48s → %s\n", key.c_str(), with_sets(outcome, j).c_str());
    else
      std::printf("  %-48s   accepted, no effect: %s\n", key.c_str(), outcome.c_str());
  }
  if (!o.sets.empty())
    std::printf("# --set is applied after the ds_config: where they meet, the values above are --set's\n");
  return verdict();
}

}  // namespace

void register_config(CLI::App& app, CommandResult& result) {
  CLI::App* cmd = app.add_subcommand("config", "Show the effective run configuration (docs/config.md)");
  cmd->require_subcommand(1);
  auto o = std::make_shared<ConfigShowOpts>();
  CLI::App* show = cmd->add_subcommand("show", "Print the effective configuration and what each ds_config key became");
  add_run_source_options(show, o->source,
                         {.np = NpOption::kWorld,
                          .model_config_help = "Hugging Face config.json replacing [model] (docs/huggingface.md)",
                          .deepspeed_help = "DeepSpeed ds_config.json (docs/deepspeed.md)",
                          .root_help = "Repository root for configs/ (default: the source tree)"});
  show->add_flag("--json", o->json, "Print {\"config\": ..., \"deepspeed\": ...} as JSON");
  show->callback([o, &result] { result.exit_code = run_config_show(*o); });
}

}  // namespace sp::cli
