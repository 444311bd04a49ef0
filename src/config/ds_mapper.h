// The mapper behind config/ds_config: typed accessors over one ds_config object (core/json_io's JsonFields)
// that record every problem (naming the dotted key), and the outcome of every key. Internal to
// config/ds_config.cc and ds_sections.cc; not an API.
// Invariant: a reader either returns the value or records why not, so one pass lists every problem.
// Reference: docs/deepspeed.md.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/ds_config.h"
#include "core/json_io.h"

namespace sp::config::ds_detail {
using json = nlohmann::json;
using Kind = DsKeyOutcome::Kind;

// Why a key is accepted with no effect, or refused: one line each, also the rows of docs/deepspeed.md.
inline constexpr const char* kOffload =
    "offload to CPU or NVMe is not built: every tensor stays in its rank's memory, where the ledger measures it";
inline constexpr const char* kBuckets =
    "gradients are reduced per synchronization unit in the canonical order (parallel/grad_store.h); bucket sizes "
    "change only message sizes and timing, never values";
inline constexpr const char* kZero3Gathers =
    "ZeRO-3 gather scheduling and caching; shardproof gathers each unit's parameters when it runs it, with the same "
    "values";

inline std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

inline std::string number_text(double x) { return fmt::format("{}", x); }

// One pass over a ds_config: typed readers that record every problem, and the outcome of every key.
class Mapper {
  // (The readers' plumbing first: the public readers' return types are deduced from it.)
  template <typename Read>
  auto read(const json& obj, const std::string& where, const char* key, Read read_field) {
    JsonFields f = JsonFields::input(obj, where, {.whole_floats_are_integers = true});
    auto value = read_field(f);
    keep(f, obj, key);
    return value;
  }
  // The reader's problems as lines of the ds_config's message.
  void keep(const JsonFields& f, const json& obj, const char* key) {
    const bool has_value = *key != '\0' && obj.is_object() && obj.contains(key);
    for (const Status& s : f.problems()) {
      const std::string line = s.message() + (s.hint().empty() ? "" : "; " + s.hint());
      errors.push_back(has_value ? with_auto_note(line, obj.at(key)) : line);
    }
  }
  // A refused "auto" gets the Hugging Face Trainer's explanation.
  static std::string with_auto_note(std::string line, const json& v) {
    if (v.is_string() && v.get<std::string>() == "auto" && line.find(" must be ") != std::string::npos)
      line +=
          " (\"auto\" is the Hugging Face Trainer's placeholder, filled in by transformers, not by DeepSpeed: "
          "write the value)";
    return line;
  }

 public:
  explicit Mapper(json& config) : config_(config) {}

  std::vector<std::string> errors;
  std::vector<DsKeyOutcome> keys;

  void mapped(const std::string& key, std::string outcome) { keys.push_back({key, Kind::kMapped, std::move(outcome)}); }
  void no_effect(const std::string& key, std::string why) { keys.push_back({key, Kind::kNoEffect, std::move(why)}); }
  void refuse(const std::string& key, const std::string& why) {
    errors.push_back(fmt::format("{}: refused: {}", key, why));
  }
  // A value the caller checks itself (a compound one) that breaks its rule: as the readers word it.
  void wrong_type(const std::string& key, const json& v, const std::string& expected) {
    errors.push_back(with_auto_note(fmt::format("{} = {} must be {}", key, v.dump(), expected), v));
  }

  // Sets `section.key = value` in the configuration; returns "section.key = value" for the outcome.
  std::string set(const std::string& section, const std::string& key, const json& value) {
    if (!config_.contains(section) || !config_[section].is_object()) config_[section] = json::object();
    config_[section][key] = value;
    return fmt::format("{}.{} = {}", section, key,
                       value.is_number_float() ? number_text(value.get<double>()) : value.dump());
  }
  void erase(const std::string& section, const std::string& key) {
    if (config_.contains(section) && config_[section].is_object()) config_[section].erase(key);
  }
  const json& config() const { return config_; }
  json& config() { return config_; }

  // Typed readers over obj[key] (core/json_io's JsonFields, with DeepSpeed's coercion of whole-valued floats to
  // integers): nullopt (or null) when absent or refused, the refusal recorded in `errors`.
  std::optional<int64_t> integer(const json& obj, const std::string& where, const char* key, int64_t lo, int64_t hi) {
    return read(obj, where, key, [&](JsonFields& f) { return f.read_integer(key, lo, hi); });
  }
  std::optional<double> number(const json& obj, const std::string& where, const char* key, double lo, double hi) {
    return read(obj, where, key, [&](JsonFields& f) { return f.read_number(key, lo, hi); });
  }
  std::optional<bool> boolean(const json& obj, const std::string& where, const char* key) {
    return read(obj, where, key, [&](JsonFields& f) { return f.read_boolean(key); });
  }
  std::optional<std::string> string(const json& obj, const std::string& where, const char* key) {
    return read(obj, where, key, [&](JsonFields& f) { return f.read_string(key); });
  }
  const json* object(const json& obj, const std::string& where, const char* key) {
    return read(obj, where, key, [&](JsonFields& f) { return f.read_object(key); });
  }
  // Every key of `obj` not in `known` is refused as unknown, naming the known keys.
  void unknown_keys(const json& obj, const std::string& where, const std::vector<std::string>& known) {
    JsonFields f = JsonFields::input(obj, where);
    f.refuse_unknown(known, "DeepSpeed's configuration refuses extra keys");
    keep(f, obj, "");
  }
  static std::string path(const std::string& where, const char* key) {
    return where.empty() ? std::string(key) : where + "." + key;
  }

 private:
  json& config_;
};

// DeepSpeed's train_batch_size = micro × accumulation × dp, with its inference of the missing one

// The sections (ds_sections.cc): each maps its keys, refuses what it cannot honour, and lists unknown keys.
void map_zero(Mapper& m, const json& z);
void map_precision(Mapper& m, const json& ds);
// The scheduler's type when "scheduler" is an object with a string type, else "".
std::string scheduler_type(const json& ds);
// `sched`: the scheduler's type, so that the optimizer's lr can say whose lr wins.
void map_optimizer(Mapper& m, const json& o, const std::string& sched);
void map_scheduler(Mapper& m, const json& s);
void map_activation_checkpointing(Mapper& m, const json& a);

}  // namespace sp::config::ds_detail
