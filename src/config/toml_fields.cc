#include "config/toml_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/file_io.h"
#include "core/json_io.h"

namespace sp::config {
namespace {

std::string value_text(const toml::node& n) {
  if (auto* s = n.as_string()) return fmt::format("\"{}\"", s->get());
  if (auto* i = n.as_integer()) return fmt::format("{}", i->get());
  if (auto* f = n.as_floating_point()) return fmt::format("{}", f->get());
  if (auto* b = n.as_boolean()) return b->get() ? "true" : "false";
  if (n.is_table()) return "a table";
  if (n.is_array()) return "an array";
  return "a date or time";
}

const char* rule_text(NumberRule rule) {
  switch (rule) {
    case NumberRule::kAny:
      return "a number";
    case NumberRule::kPositive:
      return "> 0";
    case NumberRule::kNonNegative:
      return ">= 0";
    case NumberRule::kFraction:
      return "in (0, 1]";
  }
  return "?";
}

}  // namespace

Result<toml::table> parse_toml_text(const std::string& text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& e) {
    return invalid_argument("{}:{}:{}: {}", origin, e.source().begin.line, e.source().begin.column, e.description());
  }
}

Result<toml::table> parse_toml_file(const std::string& path) {
  if (!std::filesystem::exists(path)) return invalid_argument("file '{}' does not exist", path);
  SP_ASSIGN_OR_RETURN(std::string text, read_file(path, uint64_t{1} << 24));
  return parse_toml_text(text, path);
}

nlohmann::json toml_to_json(const toml::node& node) {
  using nlohmann::json;
  if (auto* t = node.as_table()) {
    json o = json::object();
    for (auto&& [k, v] : *t) o[std::string(k.str())] = toml_to_json(v);
    return o;
  }
  if (auto* a = node.as_array()) {
    json arr = json::array();
    for (auto&& v : *a) arr.push_back(toml_to_json(v));
    return arr;
  }
  if (auto* s = node.as_string()) return s->get();
  if (auto* i = node.as_integer()) return i->get();
  if (auto* f = node.as_floating_point()) return f->get();
  if (auto* b = node.as_boolean()) return b->get();
  if (auto* d = node.as_date()) return fmt::format("{:04}-{:02}-{:02}", d->get().year, d->get().month, d->get().day);
  return json("<unsupported TOML value>");
}

TomlFields::TomlFields(const toml::table* table, std::string prefix, std::string origin,
                       std::vector<std::string>* errors)
    : table_(table), prefix_(std::move(prefix)), origin_(std::move(origin)), errors_(errors) {}

std::string TomlFields::name(const char* key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

std::string TomlFields::where(const char* key) const {
  // The key's own line; for a missing key the line of its section's header (none for the root table).
  const toml::node* n = table_ ? table_->get(key) : nullptr;
  const toml::node* at = n ? n : prefix_.empty() ? nullptr : table_;
  if (at && at->source().begin.line > 0) return fmt::format("{}:{}: {}", origin_, at->source().begin.line, name(key));
  return fmt::format("{}: {}", origin_, name(key));
}

void TomlFields::error(const std::string& message) { errors_->push_back(message); }

const toml::node* TomlFields::take(const char* key) {
  known_.emplace_back(key);
  return table_ ? table_->get(key) : nullptr;
}

std::optional<double> TomlFields::number(const char* key, NumberRule rule, bool required) {
  const toml::node* n = take(key);
  if (!n) {
    if (required && table_) error(fmt::format("{}: missing field (rule: a number {})", where(key), rule_text(rule)));
    return std::nullopt;
  }
  if (!n->is_integer() && !n->is_floating_point()) {
    error(fmt::format("{} = {} must be a number {}", where(key), value_text(*n), rule_text(rule)));
    return std::nullopt;
  }
  const double v = n->value<double>().value_or(std::nan(""));
  bool ok = std::isfinite(v);
  if (rule == NumberRule::kPositive) ok = ok && v > 0;
  if (rule == NumberRule::kNonNegative) ok = ok && v >= 0;
  if (rule == NumberRule::kFraction) ok = ok && v > 0 && v <= 1;
  if (!ok) {
    error(fmt::format("{} = {} must be {}", where(key), value_text(*n), rule_text(rule)));
    return std::nullopt;
  }
  return v;
}

std::optional<int64_t> TomlFields::integer(const char* key, int64_t min, int64_t max, bool required) {
  const toml::node* n = take(key);
  if (!n) {
    if (required && table_)
      error(fmt::format("{}: missing field (rule: an integer in [{}, {}])", where(key), min, max));
    return std::nullopt;
  }
  if (!n->is_integer()) {
    error(fmt::format("{} = {} must be an integer in [{}, {}]", where(key), value_text(*n), min, max));
    return std::nullopt;
  }
  const int64_t v = n->as_integer()->get();
  if (v < min || v > max) {
    error(fmt::format("{} = {} must be an integer in [{}, {}]", where(key), v, min, max));
    return std::nullopt;
  }
  return v;
}

std::optional<int64_t> TomlFields::integer(const char* key, bool required) {
  const toml::node* n = take(key);
  if (!n) {
    if (required && table_) error(fmt::format("{}: missing field (rule: an integer)", where(key)));
    return std::nullopt;
  }
  if (!n->is_integer()) {
    error(fmt::format("{} = {} must be an integer", where(key), value_text(*n)));
    return std::nullopt;
  }
  return n->as_integer()->get();
}

std::optional<std::string> TomlFields::string(const char* key, bool required) {
  const toml::node* n = take(key);
  if (!n) {
    if (required && table_) error(fmt::format("{}: missing field (rule: a string)", where(key)));
    return std::nullopt;
  }
  if (!n->is_string()) {
    error(fmt::format("{} = {} must be a string", where(key), value_text(*n)));
    return std::nullopt;
  }
  return n->as_string()->get();
}

std::optional<std::string> TomlFields::choice(const char* key, const std::vector<std::string>& choices, bool required) {
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "\"" : ", \"") + c + "\"";
  const toml::node* n = take(key);
  if (!n) {
    if (required && table_) error(fmt::format("{}: missing field (rule: one of {})", where(key), list));
    return std::nullopt;
  }
  if (!n->is_string() || std::find(choices.begin(), choices.end(), n->as_string()->get()) == choices.end()) {
    error(fmt::format("{} = {} must be one of {}", where(key), value_text(*n), list));
    return std::nullopt;
  }
  return n->as_string()->get();
}

std::optional<std::vector<std::string>> TomlFields::strings(const char* key, bool required) {
  const toml::node* n = take(key);
  if (!n) {
    if (required && table_) error(fmt::format("{}: missing field (rule: an array of strings)", where(key)));
    return std::nullopt;
  }
  const toml::array* a = n->as_array();
  if (!a) {
    error(fmt::format("{} = {} must be an array of strings", where(key), value_text(*n)));
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (const auto& e : *a) {
    if (!e.is_string()) {
      error(fmt::format("{} must be an array of strings; element {} is {}", where(key), out.size() + 1, value_text(e)));
      return std::nullopt;
    }
    out.push_back(e.as_string()->get());
  }
  return out;
}

std::optional<bool> TomlFields::boolean(const char* key, bool required) {
  const toml::node* n = take(key);
  if (!n) {
    if (required && table_) error(fmt::format("{}: missing field (rule: true or false)", where(key)));
    return std::nullopt;
  }
  if (!n->is_boolean()) {
    error(fmt::format("{} = {} must be true or false", where(key), value_text(*n)));
    return std::nullopt;
  }
  return n->as_boolean()->get();
}

const toml::table* TomlFields::table(const char* key, bool required) {
  const toml::node* n = take(key);
  if (!n) {
    if (required && table_) error(fmt::format("{}: missing table [{}]", where(key), name(key)));
    return nullptr;
  }
  if (!n->is_table()) {
    error(fmt::format("{} = {} must be a table [{}]", where(key), value_text(*n), name(key)));
    return nullptr;
  }
  return n->as_table();
}

std::vector<const toml::table*> TomlFields::tables(const char* key, bool required) {
  const toml::node* n = take(key);
  std::vector<const toml::table*> out;
  if (!n) {
    if (required && table_) error(fmt::format("{}: missing array of tables [[{}]]", where(key), name(key)));
    return out;
  }
  const toml::array* a = n->as_array();
  if (a && a->is_array_of_tables())
    for (const auto& e : *a) out.push_back(e.as_table());
  else
    error(fmt::format("{} must be an array of tables [[{}]]", where(key), name(key)));
  return out;
}

std::vector<std::string> TomlFields::keys() {
  std::vector<std::string> out;
  if (table_)
    for (auto&& [k, v] : *table_) out.emplace_back(k.str());
  known_.insert(known_.end(), out.begin(), out.end());
  return out;
}

void TomlFields::finish() {
  if (!table_) return;
  for (auto&& [k, v] : *table_) {
    const std::string key(k.str());
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    std::string list;
    for (const auto& s : known_) list += (list.empty() ? "" : ", ") + s;
    error(fmt::format("{}:{}: unknown key {} (known keys{}: {})", origin_, v.source().begin.line,
                      name(shown_key(key).c_str()), prefix_.empty() ? "" : " in [" + prefix_ + "]", list));
  }
}

Status fields_status(const std::string& what, const std::vector<std::string>& errors, const std::string& hint) {
  if (errors.empty()) return Status();
  std::string msg = fmt::format("{}: {} problem{}", what, errors.size(), errors.size() == 1 ? "" : "s");
  for (const auto& e : errors) msg += "\n  - " + e;
  return Status(StatusCode::kInvalidArgument, msg, hint);
}

}  // namespace sp::config
