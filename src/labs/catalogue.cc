// Reading configs/labs/catalogue.toml (docs/formats/labs.md) through the project's TOML parser and field
// reader (config/toml_fields.h): one level at a time (top level, one [[lab]] of each kind), every field's
// type problem of a level reported at once naming the file, the line, the lab and the field; then the
// catalogue's own rules, each naming the line:column of the offending value.
#include "labs/catalogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include "comm/process_grid.h"
#include "config/toml_fields.h"
#include "plan/strategy.h"
#include "planner/evaluate.h"
#include "planner/model_shape.h"

namespace sp::labs {
namespace {

constexpr std::string_view kFormatHint = "the fields of the lab catalogue are described in docs/formats/labs.md";

// Where a node is, as the catalogue's own rules print it: "FILE:LINE:COL" (just FILE for the document itself).
std::string where(const std::string& path, const toml::node& n) {
  const toml::source_region& s = n.source();
  if (s.begin.line == 0) return path;
  return fmt::format("{}:{}:{}", path, s.begin.line, s.begin.column);
}

// The run fields of each kind; a lab of one kind (or an unavailable lab) may not carry the other's.
const std::vector<std::string_view> kProveKeys = {"preset", "model_config", "deepspeed", "sets",
                                                  "world",  "fault",        "variations"};
const std::vector<std::string_view> kPlanKeys = {"model",    "strategy",   "nodes",          "global_batch",
                                                 "clusters", "placements", "fault_placement"};
const std::vector<std::string_view> kJudgeKeys = {"script", "args", "world", "fault"};

// Every problem the field reader found in one table, as one error naming the file (exit 2).
Status read_problems(const std::string& path, const std::vector<std::string>& errors) {
  return config::fields_status(path, errors, std::string(kFormatHint));
}

// A required text or list that is present but empty: the catalogue's rule, beyond the field's type.
Status non_empty(const std::string& path, const toml::table& t, const std::string& owner,
                 const std::vector<std::pair<const char*, bool>>& empty_fields) {
  for (const auto& [key, empty] : empty_fields)
    if (empty && t.get(key) != nullptr)
      return invalid_argument("{}: {}: '{}' is {}", where(path, *t.get(key)), owner, key,
                              t.get(key)->is_array() ? "an empty array" : "empty")
          .with_hint(std::string(kFormatHint));
  return Status();
}

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

// The plan lab's own fields (kind = "plan"), read into `lab.plan`; their types are checked by `f`.
void read_plan_fields(config::TomlFields& f, Lab& lab, int64_t& nodes) {
  PlanLabSpec& p = lab.plan;
  p.model = f.string("model").value_or("");
  p.strategy = f.string("strategy").value_or("");
  nodes = f.integer("nodes", true).value_or(0);
  p.global_batch = f.integer("global_batch", true).value_or(0);
  p.clusters = f.strings("clusters").value_or(std::vector<std::string>{});
  p.placements = f.strings("placements").value_or(std::vector<std::string>{});
  p.fault_placement = f.string("fault_placement").value_or("");
}

// The plan lab's rules. Whether each (cluster, placement) evaluates is validate_lab's business (it needs the
// tree's configs/clusters); here: names and the strategy's grammar.
Status check_plan_fields(const std::string& path, const toml::table& t, const std::string& owner, int64_t nodes,
                         Lab& lab) {
  PlanLabSpec& p = lab.plan;
  const auto at = [&](std::string_view key) { return where(path, *t.get(key)); };
  SP_RETURN_IF_ERROR(non_empty(path, t, owner,
                               {{"model", p.model.empty()},
                                {"strategy", p.strategy.empty()},
                                {"fault_placement", p.fault_placement.empty()},
                                {"clusters", p.clusters.empty()},
                                {"placements", p.placements.empty()}}));
  Result<planner::ModelShape> shape = planner::named_shape(p.model);
  if (!shape.ok())
    return invalid_argument("{}: {}: 'model' names no model shape: {}", at("model"), owner, shape.status().message())
        .with_hint(shape.status().hint() + " (`shardproof plan list`)");
  // Over the engine's defaults around the shape, as `shardproof plan` takes them (fast reductions, micro-batch 1).
  const plan::Strategy around = plan::strategy_of(planner::run_config_around(shape->engine_counterpart(), ""));
  Result<plan::Strategy> strategy = plan::parse_strategy(p.strategy, around);
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
  p.parsed = *strategy;
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

// A field of another kind (or a run in an unavailable lab, or a reason in a runnable one), named as such
// rather than as an unknown key.
Status misplaced_field(const std::string& path, const toml::table& t, const std::string& owner, const Lab& lab,
                       const std::string& kind) {
  const bool runs = lab.available;
  const std::vector<std::string_view>& own = lab.is_plan() ? kPlanKeys : (lab.is_judge() ? kJudgeKeys : kProveKeys);
  std::vector<std::string_view> misplaced;
  for (const auto* keys : {&kProveKeys, &kPlanKeys, &kJudgeKeys})
    for (std::string_view k : *keys)
      if (!runs || std::find(own.begin(), own.end(), k) == own.end()) misplaced.push_back(k);
  if (runs) misplaced.insert(misplaced.end(), {"unavailable_reason", "closest"});
  if (!runs) misplaced.insert(misplaced.end(), {"observe", "cannot_extrapolate"});
  for (std::string_view k : misplaced) {
    if (t.get(k) == nullptr) continue;
    const bool unavailable_field = k == "unavailable_reason" || k == "closest";
    const std::string what = !runs               ? "an unavailable"
                             : unavailable_field ? "an available"
                                                 : (kind == "prove" ? "a proof" : "a " + kind);
    return invalid_argument("{}: {}: '{}' does not belong to {} lab", where(path, *t.get(k)), owner, k, what)
        .with_hint(!runs ? "an unavailable lab has no run: remove it, or drop available = false"
                   : unavailable_field
                       ? "a lab that runs has no unavailable_reason or closest; set available = false if it "
                         "cannot run"
                       : fmt::format("the fields of each kind of lab are in docs/formats/labs.md (this lab's kind "
                                     "is \"{}\")",
                                     kind));
  }
  return Status();
}

// One observation, `{ text = "...", check = ["CLAIM", ...] }`: its prose and at least one claim.
void read_observation(const std::string& path, const toml::table& t, const std::string& owner,
                      std::vector<Observation>& observe, std::vector<std::string>& errors) {
  config::TomlFields f(&t, fmt::format("{}.observe[{}]", owner, observe.size() + 1), path, &errors);
  Observation o{.text = f.string("text").value_or(""),
                .checks = f.strings("check").value_or(std::vector<std::string>{})};
  f.finish();
  if (o.text.empty() || o.checks.empty())
    errors.push_back(fmt::format("{}: {}.observe[{}] needs a non-empty text and at least one claim in check",
                                 where(path, t), owner, observe.size() + 1));
  // A claim once per lab (or variation): a copy would hold wherever the other does, so it checks nothing
  // new, and the negation test cannot plant a wrong value into one copy (tests/support/lab_claims.py).
  for (size_t i = 0; i < o.checks.size(); ++i) {
    auto seen = [&](const std::vector<std::string>& cs, size_t n) {
      return std::find(cs.begin(), cs.begin() + static_cast<std::ptrdiff_t>(n), o.checks[i]) !=
             cs.begin() + static_cast<std::ptrdiff_t>(n);
    };
    bool twice = seen(o.checks, i);
    for (const Observation& other : observe) twice = twice || seen(other.checks, other.checks.size());
    if (twice)
      errors.push_back(fmt::format("{}: {}.observe[{}]: the claim '{}' is written twice in {}; write it once",
                                   where(path, t), owner, observe.size() + 1, o.checks[i], owner));
  }
  observe.push_back(std::move(o));
}

bool is_variation_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; });
}

// One variation, `{ name, sets, [world], [fault], observe }`: a name of its own, at least one --set and at least
// one observation; problems go to `errors` like the lab's own fields.
void read_variation(const std::string& path, const toml::table& t, const std::string& owner, Lab& lab,
                    std::vector<std::string>& errors) {
  const std::string at = fmt::format("{}.variations[{}]", owner, lab.variations.size() + 1);
  config::TomlFields f(&t, at, path, &errors);
  Variation v{.name = f.string("name").value_or(""), .sets = f.strings("sets").value_or(std::vector<std::string>{})};
  v.world = static_cast<int>(f.integer("world", false).value_or(0));
  v.fault = f.string("fault", false).value_or("");
  for (const toml::table* o : f.tables("observe")) read_observation(path, *o, at, v.observe, errors);
  f.finish();
  if (!is_variation_name(v.name))
    errors.push_back(
        fmt::format("{}: {}: 'name' must be lowercase letters, digits and '-', not '{}'", where(path, t), at, v.name));
  if (v.sets.empty() || v.observe.empty())
    errors.push_back(fmt::format("{}: {} needs at least one --set in sets and one observation", where(path, t), at));
  if (t.get("world") != nullptr && (v.world < 1 || v.world > 1024))
    errors.push_back(fmt::format("{}: {}: 'world' is {}; it must be 1 to 1024", where(path, t), at, v.world));
  for (const Variation& other : lab.variations)
    if (other.name == v.name)
      errors.push_back(fmt::format("{}: {}: variation '{}' is defined twice", where(path, t), at, v.name));
  lab.variations.push_back(std::move(v));
}

// The fields of one [[lab]] of its kind, read with their types checked; every type problem of the table at once.
Status read_lab_fields(const std::string& path, const toml::table& t, const std::string& owner, Lab& lab,
                       std::string& kind, int64_t& world, int64_t& nodes) {
  std::vector<std::string> errors;
  config::TomlFields f(&t, owner, path, &errors);
  lab.key = f.string("key").value_or("");
  lab.section = f.string("section").value_or("");
  lab.title = f.string("title").value_or("");
  lab.mechanism = f.string("mechanism").value_or("");
  kind = f.string("kind", false).value_or("prove");
  // The kind decides which fields the lab has: an unknown kind is refused before they are read.
  if (kind != "prove" && kind != "plan" && kind != "judge")
    return invalid_argument("{}: {}: 'kind' is '{}'; it must be \"prove\", \"plan\" or \"judge\"",
                            where(path, *t.get("kind")), owner, kind)
        .with_hint(
            "prove: the proof protocol on a preset with one fault; plan: the planner on clusters × "
            "placements; judge: a PyTorch script recorded with and without a planted bug, each judged");
  lab.kind = kind == "plan" ? LabKind::kPlan : (kind == "judge" ? LabKind::kJudge : LabKind::kProve);
  lab.available = f.boolean("available", false).value_or(true);
  // A runnable lab has a run and what to read; an unavailable one has a reason and a pointer instead.
  const bool runs = lab.available, plans = runs && lab.is_plan(), judges = runs && lab.is_judge();
  const bool proves = runs && !plans && !judges;
  for (const toml::table* o : f.tables("observe", runs)) read_observation(path, *o, owner, lab.observe, errors);
  lab.cannot_extrapolate = f.strings("cannot_extrapolate", runs).value_or(std::vector<std::string>{});
  lab.unavailable_reason = f.string("unavailable_reason", !runs).value_or("");
  lab.closest = f.strings("closest", !runs).value_or(std::vector<std::string>{});
  if (proves) {
    lab.preset = f.string("preset", false).value_or(lab.preset);
    lab.model_config = f.string("model_config", false).value_or("");
    lab.deepspeed = f.string("deepspeed", false).value_or("");
    lab.sets = f.strings("sets", false).value_or(std::vector<std::string>{});
    world = f.integer("world", true).value_or(0);
    lab.fault = f.string("fault").value_or("");
    for (const toml::table* v : f.tables("variations", false)) read_variation(path, *v, owner, lab, errors);
  }
  if (plans) read_plan_fields(f, lab, nodes);
  if (judges) {
    lab.script = f.string("script").value_or("");
    lab.script_args = f.strings("args", false).value_or(std::vector<std::string>{});
    world = f.integer("world", true).value_or(0);
    lab.fault = f.string("fault").value_or("");
  }
  if (errors.empty()) SP_RETURN_IF_ERROR(misplaced_field(path, t, owner, lab, kind));
  f.finish();
  return errors.empty() ? Status() : read_problems(path, errors);
}

// One [[lab]] table; `index` is its position in the file (1-based, for labs without a usable key).
Result<Lab> read_lab(const std::string& path, const toml::table& t, size_t index) {
  Lab lab;
  // The key first, so that every later message can name the lab.
  const toml::node* key = t.get("key");
  std::string owner = fmt::format("lab #{}", index);
  if (key != nullptr && key->is_string()) owner = fmt::format("lab {}", key->as_string()->get());
  std::string kind;
  int64_t world = 0, nodes = 0;
  SP_RETURN_IF_ERROR(read_lab_fields(path, t, owner, lab, kind, world, nodes));
  if (!is_lab_key(lab.key))
    return invalid_argument("{}: {}: 'key' must be LSL- and one capital letter, not '{}'", where(path, *key), owner,
                            lab.key)
        .with_hint("the labs are keyed by section order: LSL-A, LSL-B, ...");
  const bool runs = lab.available;
  SP_RETURN_IF_ERROR(non_empty(path, t, owner,
                               {{"section", lab.section.empty()},
                                {"title", lab.title.empty()},
                                {"mechanism", lab.mechanism.empty()},
                                {"observe", runs && lab.observe.empty()},
                                {"cannot_extrapolate", runs && lab.cannot_extrapolate.empty()},
                                {"unavailable_reason", !runs && lab.unavailable_reason.empty()},
                                {"closest", !runs && lab.closest.empty()}}));
  if (runs && !lab.is_plan()) {
    SP_RETURN_IF_ERROR(non_empty(path, t, owner, {{"fault", lab.fault.empty()}, {"script", lab.script.empty()}}));
    if (world < 1 || world > 1024)
      return invalid_argument("{}: {}: 'world' is {}; it must be the run's rank count dp·tp·pp (1 to 1024)",
                              where(path, *t.get("world")), owner, world)
          .with_hint("the product of the lab's parallel.dp, parallel.tp and parallel.pp sets");
    lab.world = static_cast<int>(world);
  }
  if (runs && lab.is_plan()) SP_RETURN_IF_ERROR(check_plan_fields(path, t, owner, nodes, lab));
  return lab;
}

// The top level's fields: format, version, evaluation, common_limits and the [[lab]] tables.
Result<std::vector<const toml::table*>> read_top(const std::string& path, const toml::table& root, LabCatalogue& c) {
  std::vector<std::string> errors;
  config::TomlFields top(&root, "", path, &errors);
  const std::string format = top.string("format").value_or("");
  const int64_t version = top.integer("version", true).value_or(kLabCatalogueVersion);
  c.evaluation = top.string("evaluation").value_or("");
  c.common_limits = top.strings("common_limits").value_or(std::vector<std::string>{});
  std::vector<const toml::table*> labs = top.tables("lab");
  top.finish();
  if (!errors.empty()) return read_problems(path, errors);
  if (format != kLabCatalogueFormat)
    return invalid_argument("{}: 'format' is '{}', expected '{}'", where(path, *root.get("format")), format,
                            kLabCatalogueFormat)
        .with_hint("this is not a shardproof lab catalogue");
  if (version != kLabCatalogueVersion)
    return invalid_argument("{}: 'version' is {}; this build reads version {}", where(path, *root.get("version")),
                            version, kLabCatalogueVersion)
        .with_hint(std::string(kFormatHint));
  SP_RETURN_IF_ERROR(non_empty(path, root, "the top level",
                               {{"evaluation", c.evaluation.empty()}, {"common_limits", c.common_limits.empty()}}));
  return labs;
}

}  // namespace

std::string lab_catalogue_path(const std::string& root) { return root + "/configs/labs/catalogue.toml"; }

Result<LabCatalogue> load_lab_catalogue(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return not_found("lab catalogue '{}' does not exist", path)
        .with_hint("it ships with the source tree (configs/labs/catalogue.toml); pass --root to the tree");
  Result<toml::table> parsed = config::parse_toml_file(path);
  if (!parsed.ok())
    return Status(parsed.status().code(), parsed.status().message(),
                  "the lab catalogue must be valid TOML (a key may be given only once)");
  const toml::table& root = *parsed;
  LabCatalogue c;
  c.path = path;
  SP_ASSIGN_OR_RETURN(const std::vector<const toml::table*> labs, read_top(path, root, c));

  std::map<std::string, const toml::node*> seen;
  for (size_t i = 0; i < labs.size(); ++i) {
    const toml::table& t = *labs[i];
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
                                where(path, *labs[i]->get("closest")), c.labs[i].key, key)
            .with_hint("name a lab with available = true by its full key (LSL-K)");
    }
  return c;
}

}  // namespace sp::labs
