// Reading configs/labs/catalogue.toml (docs/formats/labs.md). The reader walks the parsed TOML
// table field by field against one schema per level (top level, one [[lab]] of each kind), so that every
// message names the file, the line:column of the offending value, the lab and the field.
#include "cli/lab_catalogue.h"

#include <fmt/format.h>
#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "cli/strategy_spec.h"
#include "comm/process_grid.h"
#include "planner/model_shape.h"

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
    "key, section, title, mechanism, kind, available, observe, cannot_extrapolate; a proof lab: preset, "
    "model_config, deepspeed, sets, world, fault; a plan lab: model, strategy, nodes, global_batch, clusters, "
    "placements, fault_placement; an unavailable lab: unavailable_reason, closest";
// The run fields of each kind; a lab of one kind (or an unavailable lab) may not carry the other's.
const std::vector<std::string_view> kProveKeys = {"preset", "model_config", "deepspeed", "sets", "world", "fault"};
const std::vector<std::string_view> kPlanKeys = {"model",    "strategy",   "nodes",          "global_batch",
                                                 "clusters", "placements", "fault_placement"};

bool is_lab_key(const std::string& k) {
  return k.size() == 5 && k.compare(0, 4, "LSL-") == 0 && std::isupper(static_cast<unsigned char>(k[4]));
}

// A cluster preset's name as a plan lab gives it: a bare file stem (configs/clusters/NAME.toml).
bool is_preset_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

// The plan lab's own fields (kind = "plan"). Whether each (cluster, placement) evaluates is validate_lab's
// business (it needs the tree's configs/clusters); here: types, names and the strategy's grammar.
Status read_plan_fields(const std::string& path, Fields& f, const std::string& owner, Lab& lab) {
  proof::PlanLabSpec& p = lab.plan;
  int64_t nodes = 0;
  SP_RETURN_IF_ERROR(f.string("model", p.model, true));
  SP_RETURN_IF_ERROR(f.string("strategy", p.strategy, true));
  SP_RETURN_IF_ERROR(f.integer("nodes", nodes, true));
  SP_RETURN_IF_ERROR(f.integer("global_batch", p.global_batch, true));
  SP_RETURN_IF_ERROR(f.strings("clusters", p.clusters, true));
  SP_RETURN_IF_ERROR(f.strings("placements", p.placements, true));
  SP_RETURN_IF_ERROR(f.string("fault_placement", p.fault_placement, true));
  const auto at = [&](std::string_view key) { return where(path, *f.node(key)); };
  if (Result<planner::ModelShape> shape = planner::named_shape(p.model); !shape.ok())
    return invalid_argument("{}: {}: 'model' names no model shape: {}", at("model"), owner, shape.status().message())
        .with_hint(shape.status().hint() + " (`shardproof plan list`)");
  Result<StrategySpec> strategy = parse_strategy(p.strategy);
  if (!strategy.ok())
    return invalid_argument("{}: {}: 'strategy' '{}': {}", at("strategy"), owner, p.strategy,
                            strategy.status().message())
        .with_hint(strategy.status().hint());
  if (strategy->servers > 0)
    return invalid_argument("{}: {}: 'strategy' '{}' is a parameter server; the planner places all-reduce strategies",
                            at("strategy"), owner, p.strategy)
        .with_hint("a strategy of dpN, tpN, ppN, zeroN, a schedule and recompute (docs/compare.md §Grammar)");
  if (nodes < 1 || nodes > 4096)
    return invalid_argument("{}: {}: 'nodes' is {}; it must be 1 to 4096", at("nodes"), owner, nodes)
        .with_hint("every cluster of the lab is planned with this many nodes (plan --nodes)");
  p.nodes = static_cast<int>(nodes);
  if (p.global_batch < 1)
    return invalid_argument("{}: {}: 'global_batch' is {}; it must be at least 1", at("global_batch"), owner,
                            p.global_batch)
        .with_hint("sequences per optimizer step (plan --global-batch)");
  lab.world = strategy->world();
  p.dp = strategy->dp, p.tp = strategy->tp, p.pp = strategy->pp, p.zero = strategy->zero;
  // A contrast needs two of each, named once each.
  for (std::string_view key : {std::string_view("clusters"), std::string_view("placements")}) {
    const std::vector<std::string>& list = key == "clusters" ? p.clusters : p.placements;
    std::set<std::string> seen;
    for (const std::string& v : list)
      if (!seen.insert(v).second)
        return invalid_argument("{}: {}: '{}' names '{}' twice", at(key), owner, key, v)
            .with_hint("each case is one (cluster, placement) pair; name each once");
    if (list.size() < 2)
      return invalid_argument("{}: {}: '{}' has {} entry; a plan lab contrasts at least two", at(key), owner, key,
                              list.size())
          .with_hint(std::string(kFormatHint));
  }
  for (const std::string& c : p.clusters)
    if (!is_preset_name(c))
      return invalid_argument("{}: {}: 'clusters' names '{}', which is not a preset name", at("clusters"), owner, c)
          .with_hint("a file stem of configs/clusters/ (`shardproof plan list`), e.g. \"dgx-a100\"");
  for (const std::string& o : p.placements)
    if (Result<std::array<comm::Axis, 3>> order = comm::parse_axis_order(o); !order.ok())
      return invalid_argument("{}: {}: 'placements' names '{}': {}", at("placements"), owner, o,
                              order.status().message())
          .with_hint("an axis order of the rank grid, fastest axis first: tp-dp-pp, dp-tp-pp, ...");
  if (std::find(p.placements.begin(), p.placements.end(), p.fault_placement) == p.placements.end())
    return invalid_argument("{}: {}: 'fault_placement' '{}' is not one of 'placements'", at("fault_placement"), owner,
                            p.fault_placement)
        .with_hint("the fault placement is the one of the contrast that the topology check must flag");
  return Status();
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
  std::string kind = "prove";
  SP_RETURN_IF_ERROR(f.string("kind", kind, false));
  if (kind != "prove" && kind != "plan")
    return invalid_argument("{}: {}: 'kind' is '{}'; it must be \"prove\" or \"plan\"", where(path, *f.node("kind")),
                            owner, kind)
        .with_hint("prove: the proof protocol on a preset with one fault; plan: the planner on clusters × placements");
  lab.kind = kind == "plan" ? LabKind::kPlan : LabKind::kProve;
  SP_RETURN_IF_ERROR(f.boolean("available", lab.available));
  // A runnable lab has a run and what to read; an unavailable one has a reason and a pointer instead.
  const bool runs = lab.available;
  const bool proves = runs && !lab.is_plan(), plans = runs && lab.is_plan();
  int64_t world = 0;
  SP_RETURN_IF_ERROR(f.strings("observe", lab.observe, runs));
  SP_RETURN_IF_ERROR(f.strings("cannot_extrapolate", lab.cannot_extrapolate, runs));
  SP_RETURN_IF_ERROR(f.string("unavailable_reason", lab.unavailable_reason, !runs));
  SP_RETURN_IF_ERROR(f.strings("closest", lab.closest, !runs));
  if (proves) {
    SP_RETURN_IF_ERROR(f.string("preset", lab.preset, false));
    SP_RETURN_IF_ERROR(f.string("model_config", lab.model_config, false));
    SP_RETURN_IF_ERROR(f.string("deepspeed", lab.deepspeed, false));
    SP_RETURN_IF_ERROR(f.strings("sets", lab.sets, false));
    SP_RETURN_IF_ERROR(f.integer("world", world, true));
    SP_RETURN_IF_ERROR(f.string("fault", lab.fault, true));
    if (world < 1 || world > 1024)
      return invalid_argument("{}: {}: 'world' is {}; it must be the run's rank count dp·tp·pp (1 to 1024)",
                              where(path, *f.node("world")), owner, world)
          .with_hint("the product of the lab's parallel.dp, parallel.tp and parallel.pp sets");
    lab.world = static_cast<int>(world);
  }
  if (plans) SP_RETURN_IF_ERROR(read_plan_fields(path, f, owner, lab));
  std::vector<std::string_view> misplaced;
  if (!proves) misplaced.insert(misplaced.end(), kProveKeys.begin(), kProveKeys.end());
  if (!plans) misplaced.insert(misplaced.end(), kPlanKeys.begin(), kPlanKeys.end());
  if (runs) misplaced.insert(misplaced.end(), {"unavailable_reason", "closest"});
  if (!runs) misplaced.insert(misplaced.end(), {"observe", "cannot_extrapolate"});
  for (std::string_view k : misplaced)
    if (f.has(k)) {
      const bool unavailable_field = k == "unavailable_reason" || k == "closest";
      const std::string_view what =
          !runs ? "an unavailable" : (unavailable_field ? "an available" : (plans ? "a plan" : "a proof"));
      return invalid_argument("{}: {}: '{}' does not belong to {} lab", where(path, *f.node(k)), owner, k, what)
          .with_hint(!runs ? "an unavailable lab has no run: remove it, or drop available = false"
                     : unavailable_field
                         ? "a lab that runs has no unavailable_reason or closest; set available = false if it "
                           "cannot run"
                         : fmt::format("the fields of each kind of lab are in docs/formats/labs.md (this lab's kind "
                                       "is \"{}\")",
                                       kind));
    }
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
