// The reader behind plan/ds_config: typed accessors over one ds_config object that record every problem
// (naming the dotted key), and the outcome of every key. Internal to plan/ds_config*.cc; not an API.
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
 public:
  explicit Mapper(json& config) : config_(config) {}

  std::vector<std::string> errors;
  std::vector<DsKeyOutcome> keys;

  void mapped(const std::string& key, std::string outcome) { keys.push_back({key, Kind::kMapped, std::move(outcome)}); }
  void no_effect(const std::string& key, std::string why) { keys.push_back({key, Kind::kNoEffect, std::move(why)}); }
  void refuse(const std::string& key, const std::string& why) {
    errors.push_back(fmt::format("{}: refused: {}", key, why));
  }
  void wrong_type(const std::string& key, const json& v, const std::string& expected) {
    std::string msg = fmt::format("{} = {} must be {}", key, v.dump(), expected);
    if (v.is_string() && v.get<std::string>() == "auto")
      msg +=
          " (\"auto\" is the Hugging Face Trainer's placeholder, filled in by transformers, not by DeepSpeed: "
          "write the value)";
    errors.push_back(msg);
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

  // Typed readers: nullopt when absent or wrong (the latter recorded).
  std::optional<int64_t> integer(const json& obj, const std::string& where, const char* key, int64_t lo, int64_t hi) {
    if (!obj.contains(key)) return std::nullopt;
    const json& v = obj.at(key);
    // DeepSpeed's pydantic models coerce 5e8 to 500000000; a whole-valued float is accepted likewise.
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>() && std::abs(v.get<double>()) < 9e15) {
      const auto x = static_cast<int64_t>(v.get<double>());
      if (x >= lo && x <= hi) return x;
    }
    if (!v.is_number_integer()) {
      wrong_type(path(where, key), v, fmt::format("an integer in [{}, {}]", lo, hi));
      return std::nullopt;
    }
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) {
      errors.push_back(fmt::format("{} = {} is out of range [{}, {}]", path(where, key), x, lo, hi));
      return std::nullopt;
    }
    return x;
  }
  std::optional<double> number(const json& obj, const std::string& where, const char* key, double lo, double hi) {
    if (!obj.contains(key)) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_number()) {
      wrong_type(path(where, key), v, fmt::format("a number in [{}, {}]", lo, hi));
      return std::nullopt;
    }
    const double x = v.get<double>();
    if (!(x >= lo && x <= hi)) {
      errors.push_back(fmt::format("{} = {} is out of range [{}, {}]", path(where, key), v.dump(), lo, hi));
      return std::nullopt;
    }
    return x;
  }
  std::optional<bool> boolean(const json& obj, const std::string& where, const char* key) {
    if (!obj.contains(key)) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_boolean()) {
      wrong_type(path(where, key), v, "true or false");
      return std::nullopt;
    }
    return v.get<bool>();
  }
  std::optional<std::string> string(const json& obj, const std::string& where, const char* key) {
    if (!obj.contains(key)) return std::nullopt;
    const json& v = obj.at(key);
    if (!v.is_string()) {
      wrong_type(path(where, key), v, "a string");
      return std::nullopt;
    }
    return v.get<std::string>();
  }
  // The object at obj[key], or null (a wrong type recorded).
  const json* object(const json& obj, const std::string& where, const char* key) {
    if (!obj.contains(key)) return nullptr;
    const json& v = obj.at(key);
    if (!v.is_object()) {
      wrong_type(path(where, key), v, "an object {...}");
      return nullptr;
    }
    return &v;
  }
  // Every key of `obj` not in `known` is refused as unknown, naming the known keys.
  void unknown_keys(const json& obj, const std::string& where, const std::vector<std::string>& known) {
    for (const auto& [k, v] : obj.items()) {
      if (std::find(known.begin(), known.end(), k) != known.end()) continue;
      std::string list;
      for (const auto& s : known) list += (list.empty() ? "" : ", ") + s;
      // {:?}: the key quoted with its invisible bytes escaped ("train_batch_size\x00" is not train_batch_size).
      errors.push_back(fmt::format("{}{}: unknown key (DeepSpeed's configuration refuses extra keys; known{}: {})",
                                   where.empty() ? "" : where + ".", shown_key(k),
                                   where.empty() ? " top-level keys" : " in " + where, list));
    }
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
