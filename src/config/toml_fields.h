// The project's one TOML parser and one strict TOML field reader: every TOML file (presets and --config,
// --set values, cluster descriptions, published tables, the lab catalogue) is parsed by parse_toml_* and,
// where its fields are read from the TOML tree, read with TomlFields. A run configuration is TOML → JSON
// (toml_to_json) → RunConfig, read with core/json_io's JsonFields. Not a schema language: each caller
// names its fields in code.
// Invariant: every problem is collected, not just the first — a missing field, a wrong type, a value
// outside its rule, an unknown key — each message naming "file:line: section.key", the value and the
// rule, so that one run of the tool lists everything to fix. Reference: docs/formats/cluster.md.
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace sp::config {

// Parses TOML text; a syntax error names origin:line:column.
Result<toml::table> parse_toml_text(const std::string& text, const std::string& origin);
// Reads and parses a file; a missing file is a usage error (kInvalidArgument, exit 2) naming the path.
Result<toml::table> parse_toml_file(const std::string& path);
// A TOML value as JSON: tables → objects, arrays → arrays, a date → "YYYY-MM-DD".
nlohmann::json toml_to_json(const toml::node& node);

// Rules for numbers. kPositive: > 0; kNonNegative: ≥ 0; kFraction: in (0, 1].
enum class NumberRule { kAny, kPositive, kNonNegative, kFraction };

class TomlFields {
 public:
  // `table` may be null: a missing section, which its parent's table() already reported, so its fields
  // report nothing more.
  // `prefix` names the section in messages ("intra_node"); empty for the root.
  TomlFields(const toml::table* table, std::string prefix, std::string origin, std::vector<std::string>* errors);

  // Required fields report "missing field"; optional ones return nullopt when absent.
  std::optional<double> number(const char* key, NumberRule rule, bool required = true);
  std::optional<int64_t> integer(const char* key, int64_t min, int64_t max, bool required = true);
  // Any integer: the caller checks its range with its own message.
  std::optional<int64_t> integer(const char* key, bool required);
  std::optional<std::string> string(const char* key, bool required = true);
  // One of `choices`; the message lists them.
  std::optional<std::string> choice(const char* key, const std::vector<std::string>& choices, bool required = true);
  // An array of strings; a wrong element is named by its position.
  std::optional<std::vector<std::string>> strings(const char* key, bool required = true);
  std::optional<bool> boolean(const char* key, bool required = true);
  // A sub-table; null (with "missing table" when required) if absent or not a table.
  const toml::table* table(const char* key, bool required = true);
  // An array of tables ([[key]]); empty (with an error when required) if absent.
  std::vector<const toml::table*> tables(const char* key, bool required = true);
  // Every key of the table, for free-form maps such as peak_tflops; marks them all as read.
  std::vector<std::string> keys();

  // Reports every key that no accessor asked for, with the known keys as the fix.
  void finish();
  // "origin:line: prefix.key" for messages about a field the caller checks itself.
  std::string where(const char* key) const;
  void error(const std::string& message);

 private:
  const toml::node* take(const char* key);
  std::string name(const char* key) const;
  const toml::table* table_;
  std::string prefix_, origin_;
  std::vector<std::string>* errors_;
  std::vector<std::string> known_;
};

// kInvalidArgument "<what>: N problems" with one line per problem, or ok if `errors` is empty.
Status fields_status(const std::string& what, const std::vector<std::string>& errors, const std::string& hint);

}  // namespace sp::config
