// The run configuration's TOML side: a preset or --config file read through the one TOML parser
// (config/toml_fields.h) into the JSON that RunConfig::from_json reads, and --set section.key=value.
#include <fmt/format.h>

#include <filesystem>

#include "config/run_config.h"
#include "config/toml_fields.h"

namespace sp::config {

using nlohmann::json;

Result<json> read_toml(const std::string& path) {
  // A configuration named by the user that is not there is a usage error (exit 2), like a bad key.
  if (!std::filesystem::exists(path))
    return invalid_argument("config file '{}' does not exist", path).with_hint("check the path");
  SP_ASSIGN_OR_RETURN(const toml::table t, parse_toml_file(path));
  return toml_to_json(t);
}

Status apply_override(json& config, const std::string& assignment) {
  const auto eq = assignment.find('=');
  const auto dot = assignment.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    return invalid_argument("--set '{}' is not of the form section.key=value", assignment)
        .with_hint("for example --set parallel.dp=4 or --set train.lr=1e-3");
  const std::string section = assignment.substr(0, dot);
  const std::string key = assignment.substr(dot + 1, eq - dot - 1);
  const std::string text = assignment.substr(eq + 1);
  // The value as TOML writes it (3, 1e-3, true, "x"); a bare word is a string: --set parallel.schedule=gpipe.
  Result<toml::table> t = parse_toml_text("v = " + text, "--set");
  const json value = t.ok() && t->get("v") != nullptr ? toml_to_json(*t->get("v")) : json(text);
  if (key.empty()) return invalid_argument("--set '{}' has an empty key", assignment);
  if (!config.contains(section)) config[section] = json::object();
  config[section][key] = value;
  return Status();
}

Result<json> read_preset(const std::string& configs_dir, const std::string& name) {
  const std::string path = configs_dir + "/" + name + ".toml";
  if (!std::filesystem::exists(path)) {
    std::string names;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(configs_dir, ec))
      if (entry.path().extension() == ".toml") names += (names.empty() ? "" : ", ") + entry.path().stem().string();
    return invalid_argument("no preset named '{}' in {}", name, configs_dir)
        .with_hint(names.empty() ? "no presets found; pass --config FILE" : "presets: " + names);
  }
  SP_ASSIGN_OR_RETURN(json j, read_toml(path));
  if (!j.contains("name")) j["name"] = name;
  return j;
}

}  // namespace sp::config
