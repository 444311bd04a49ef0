// Reading configs/labs/catalogue.toml (docs/formats/labs.md). The reader walks the parsed TOML
// table field by field against one schema per level (top level, one [[lab]]), so that every message
// names the file, the line:column of the offending value, the lab and the field.
#include "cli/lab_catalogue.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <set>

namespace sp::cli {
namespace {

constexpr std::string_view kFormatHint = "the fields of the lab catalogue are described in docs/formats/labs.md";

std::string_view type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a boolean";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date or time";
  }
}

// Where a node is, as the reader prints it: "FILE:LINE:COL" (just FILE for the document itself).
std::string where(const std::string& path, const toml::node& n) {
  const toml::source_region& s = n.source();
  if (s.begin.line == 0) return path;
  return fmt::format("{}:{}:{}", path, s.begin.line, s.begin.column);
}

// The fields of one table, read with their types checked; `owner` names the table in messages
// ("lab LSL-D", "the top level"). Every key must be read exactly once: finish() refuses the rest.
class Fields {
 public:
  Fields(const std::string& path, const toml::table& table, std::string owner)
      : path_(path), table_(table), owner_(std::move(owner)) {}

  // Optional fields leave `out` unchanged when absent; required ones are an error then.
  Status string(std::string_view key, std::string& out, bool required) {
    const toml::node* n = take(key);
    if (n == nullptr) return required ? missing(key, "a string") : Status();
    if (!n->is_string()) return wrong(*n, key, "a string");
    out = n->as_string()->get();
    if (required && out.empty())
      return invalid_argument("{}: {}: '{}' is empty", where(path_, *n), owner_, key)
          .with_hint(std::string(kFormatHint));
    return Status();
  }
  Status integer(std::string_view key, int64_t& out, bool required) {
    const toml::node* n = take(key);
    if (n == nullptr) return required ? missing(key, "an integer") : Status();
    if (!n->is_integer()) return wrong(*n, key, "an integer");
    out = n->as_integer()->get();
    return Status();
  }
  Status boolean(std::string_view key, bool& out) {
    const toml::node* n = take(key);
    if (n == nullptr) return Status();
    if (!n->is_boolean()) return wrong(*n, key, "a boolean (true or false)");
    out = n->as_boolean()->get();
    return Status();
  }
  Status strings(std::string_view key, std::vector<std::string>& out, bool required) {
    const toml::node* n = take(key);
    if (n == nullptr) return required ? missing(key, "an array of strings") : Status();
    if (!n->is_array()) return wrong(*n, key, "an array of strings");
    for (const toml::node& e : *n->as_array()) {
      if (!e.is_string())
        return invalid_argument("{}: {}: '{}' must be an array of strings; element {} is {}", where(path_, e), owner_,
                                key, out.size() + 1, type_name(e))
            .with_hint(std::string(kFormatHint));
      out.push_back(e.as_string()->get());
    }
    if (required && out.empty())
      return invalid_argument("{}: {}: '{}' is an empty array", where(path_, *n), owner_, key)
          .with_hint(std::string(kFormatHint));
    return Status();
  }
  // The array of tables `key` ([[key]] in the file), or an error.
  Result<const toml::array*> tables(std::string_view key) {
    const toml::node* n = take(key);
    if (n == nullptr) return missing(key, "an array of tables ([[" + std::string(key) + "]])");
    if (!n->is_array_of_tables()) return wrong(*n, key, "an array of tables ([[" + std::string(key) + "]])");
    return n->as_array();
  }
  bool has(std::string_view key) const { return table_.contains(key); }
  const toml::node* node(std::string_view key) const { return table_.get(key); }
  // Every key of the table must have been read.
  Status finish(std::string_view expected) const {
    for (auto&& [k, v] : table_)
      if (!read_.count(std::string(k.str())))
        return invalid_argument("{}: {}: unknown key '{}'", where(path_, v), owner_, k.str())
            .with_hint(fmt::format("the keys here are {} ({})", expected, kFormatHint));
    return Status();
  }

 private:
  const toml::node* take(std::string_view key) {
    read_.insert(std::string(key));
    return table_.get(key);
  }
  Status missing(std::string_view key, std::string_view type) const {
    return invalid_argument("{}: {}: missing required field '{}' ({})", where(path_, table_), owner_, key, type)
        .with_hint(std::string(kFormatHint));
  }
  Status wrong(const toml::node& n, std::string_view key, std::string_view type) const {
    return invalid_argument("{}: {}: '{}' must be {}, not {}", where(path_, n), owner_, key, type, type_name(n))
        .with_hint(std::string(kFormatHint));
  }

  const std::string& path_;
  const toml::table& table_;
  std::string owner_;
  std::set<std::string> read_;
};

constexpr std::string_view kTopKeys = "format, version, evaluation, common_limits, lab";
constexpr std::string_view kLabKeys =
    "key, section, title, mechanism, preset, model_config, deepspeed, sets, world, fault, observe, "
    "cannot_extrapolate, available, unavailable_reason, closest";

bool is_lab_key(const std::string& k) {
  return k.size() == 5 && k.compare(0, 4, "LSL-") == 0 && std::isupper(static_cast<unsigned char>(k[4]));
}

// One [[lab]] table; `index` is its position in the file (1-based, for labs without a usable key).
Result<Lab> read_lab(const std::string& path, const toml::table& t, size_t index) {
  Lab lab;
  // The key first, so that every later message can name the lab.
  const toml::node* key = t.get("key");
  std::string owner = fmt::format("lab #{}", index);
  if (key != nullptr && key->is_string()) owner = fmt::format("lab {}", key->as_string()->get());
  Fields f(path, t, owner);
  SP_RETURN_IF_ERROR(f.string("key", lab.key, true));
  if (!is_lab_key(lab.key))
    return invalid_argument("{}: {}: 'key' must be LSL- and one capital letter, not '{}'", where(path, *key), owner,
                            lab.key)
        .with_hint("the labs are keyed by section order: LSL-A, LSL-B, ...");
  SP_RETURN_IF_ERROR(f.string("section", lab.section, true));
  SP_RETURN_IF_ERROR(f.string("title", lab.title, true));
  SP_RETURN_IF_ERROR(f.string("mechanism", lab.mechanism, true));
  SP_RETURN_IF_ERROR(f.boolean("available", lab.available));
  // A runnable lab has a run and what to read; an unavailable one has a reason and a pointer instead.
  const bool runs = lab.available;
  int64_t world = 0;
  SP_RETURN_IF_ERROR(f.string("preset", lab.preset, false));
  SP_RETURN_IF_ERROR(f.string("model_config", lab.model_config, false));
  SP_RETURN_IF_ERROR(f.string("deepspeed", lab.deepspeed, false));
  SP_RETURN_IF_ERROR(f.strings("sets", lab.sets, false));
  SP_RETURN_IF_ERROR(f.integer("world", world, runs));
  SP_RETURN_IF_ERROR(f.string("fault", lab.fault, runs));
  SP_RETURN_IF_ERROR(f.strings("observe", lab.observe, runs));
  SP_RETURN_IF_ERROR(f.strings("cannot_extrapolate", lab.cannot_extrapolate, runs));
  SP_RETURN_IF_ERROR(f.string("unavailable_reason", lab.unavailable_reason, !runs));
  SP_RETURN_IF_ERROR(f.strings("closest", lab.closest, !runs));
  if (runs && (world < 1 || world > 1024))
    return invalid_argument("{}: {}: 'world' is {}; it must be the run's rank count dp·tp·pp (1 to 1024)",
                            where(path, *f.node("world")), owner, world)
        .with_hint("the product of the lab's parallel.dp, parallel.tp and parallel.pp sets");
  lab.world = static_cast<int>(world);
  const std::vector<std::string_view> misplaced =
      runs ? std::vector<std::string_view>{"unavailable_reason", "closest"}
           : std::vector<std::string_view>{"preset", "model_config", "deepspeed", "sets",
                                           "world",  "fault",        "observe",   "cannot_extrapolate"};
  for (std::string_view k : misplaced)
    if (f.has(k))
      return invalid_argument("{}: {}: '{}' does not belong to {} lab", where(path, *f.node(k)), owner, k,
                              runs ? "an available" : "an unavailable")
          .with_hint(runs ? "a lab that runs has no unavailable_reason or closest; set available = false if it "
                            "cannot run"
                          : "an unavailable lab has no run: remove it, or drop available = false");
  SP_RETURN_IF_ERROR(f.finish(kLabKeys));
  return lab;
}

}  // namespace

Result<const Lab*> LabCatalogue::find(std::string_view key) const {
  std::string k;
  for (char c : key) k += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (k.size() == 1) k = "LSL-" + k;
  std::string keys;
  for (const Lab& lab : labs) {
    if (lab.key == k) return &lab;
    keys += (keys.empty() ? "" : ", ") + lab.key;
  }
  return not_found("no lab '{}'", key).with_hint("the labs are " + keys + " (`shardproof lab list`)");
}

std::string lab_catalogue_path(const std::string& root) { return root + "/configs/labs/catalogue.toml"; }

Result<LabCatalogue> load_lab_catalogue(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return not_found("lab catalogue '{}' does not exist", path)
        .with_hint("it ships with the source tree (configs/labs/catalogue.toml); pass --root to the tree");
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return invalid_argument("{}:{}:{}: {}", path, e.source().begin.line, e.source().begin.column, e.description())
        .with_hint("the lab catalogue must be valid TOML (a key may be given only once)");
  }
  LabCatalogue c;
  c.path = path;
  Fields top(path, root, "the top level");
  std::string format;
  int64_t version = 0;
  SP_RETURN_IF_ERROR(top.string("format", format, true));
  if (format != kLabCatalogueFormat)
    return invalid_argument("{}: 'format' is '{}', expected '{}'", where(path, *top.node("format")), format,
                            kLabCatalogueFormat)
        .with_hint("this is not a shardproof lab catalogue");
  SP_RETURN_IF_ERROR(top.integer("version", version, true));
  if (version != kLabCatalogueVersion)
    return invalid_argument("{}: 'version' is {}; this build reads version {}", where(path, *top.node("version")),
                            version, kLabCatalogueVersion)
        .with_hint(std::string(kFormatHint));
  SP_RETURN_IF_ERROR(top.string("evaluation", c.evaluation, true));
  SP_RETURN_IF_ERROR(top.strings("common_limits", c.common_limits, true));
  SP_ASSIGN_OR_RETURN(const toml::array* labs, top.tables("lab"));
  SP_RETURN_IF_ERROR(top.finish(kTopKeys));

  std::map<std::string, const toml::node*> seen;
  for (size_t i = 0; i < labs->size(); ++i) {
    const toml::table& t = *labs->get(i)->as_table();
    SP_ASSIGN_OR_RETURN(Lab lab, read_lab(path, t, i + 1));
    if (auto [it, fresh] = seen.emplace(lab.key, &t); !fresh)
      return invalid_argument("{}: lab {} is defined twice (first at line {})", where(path, t), lab.key,
                              it->second->source().begin.line)
          .with_hint("every lab key appears once");
    c.labs.push_back(std::move(lab));
  }
  // A pointer from an unavailable lab must reach a lab that runs.
  for (size_t i = 0; i < c.labs.size(); ++i)
    for (const std::string& key : c.labs[i].closest) {
      Result<const Lab*> target = c.find(key);
      if (!target.ok() || !(*target)->available || (*target)->key != key)
        return invalid_argument("{}: lab {}: 'closest' names '{}', which is not a runnable lab of this file",
                                where(path, *labs->get(i)->as_table()->get("closest")), c.labs[i].key, key)
            .with_hint("name a lab with available = true by its full key (LSL-K)");
    }
  return c;
}

}  // namespace sp::cli
