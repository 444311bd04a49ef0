// lab run --against (labs/against.h): four figures of each bundle's parallel run, side by side.
#include "labs/against.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bubble.h"

namespace sp::labs {
namespace {

using nlohmann::json;

// Named figures of one bundle's parallel run; absent ones are not in the map.
std::map<std::string, double> figures(const std::string& bundle) {
  std::map<std::string, double> out;
  const std::string run = bundle + "/parallel";
  if (Result<json> ledger = read_json_file(run + "/ledger.json"); ledger.ok()) {
    const json& cats = (*ledger)["ranks"][0]["categories"];
    if (cats.is_object())
      for (const auto& [name, c] : cats.items())
        out["memory " + name + " (MiB, rank 0 peak)"] = c.value("measured_peak", 0.0) / 1048576.0;
  }
  if (Result<JsonlDocument> trace = read_jsonl_file(run + "/trace/rank-00000.jsonl", TornTail::kAllow); trace.ok())
    for (const json& r : trace->records) {
      if (r.value("step", -1) != 1) continue;
      const std::string group = r.value("group", std::string("?"));
      out["bytes on " + group.substr(0, group.find('[')) + " groups (MiB, rank 0, step 1)"] +=
          r.value("bytes", 0.0) / 1048576.0;
    }
  if (Result<evidence::BubbleReport> b = evidence::bubble_of_run(run); b.ok() && b->shape.pp > 1)
    out["pipeline bubble (measured, fraction)"] = b->measured;
  if (Result<JsonlDocument> m = read_jsonl_file(run + "/metrics.jsonl", TornTail::kAllow); m.ok()) {
    std::vector<double> tps;
    for (const json& r : m->records)
      if (r.value("step", -1) >= 1 && r.contains("tokens_per_s")) tps.push_back(r["tokens_per_s"].get<double>());
    if (!tps.empty()) {
      std::sort(tps.begin(), tps.end());
      out["tokens/s (median of steps >= 1; contended cores)"] = tps[tps.size() / 2];
    }
  }
  return out;
}

std::string shown(const std::optional<double>& v) { return v ? fmt::format("{:.4g}", *v) : "–"; }

}  // namespace

Status check_against_dir(const std::string& dir) {
  if (!path_exists(dir + "/parallel/ledger.json"))
    return invalid_argument("--against {}: no proof bundle there (its parallel/ledger.json is missing)", dir)
        .with_hint("give the directory a `lab run KEY --out DIR` wrote without --set, the lab's own run");
  return Status();
}

std::string lab_against_text(const std::string& mine, const std::string& theirs) {
  const std::map<std::string, double> a = figures(theirs), b = figures(mine);
  std::map<std::string, int> names;
  for (const auto& m : {a, b})
    for (const auto& [k, v] : m) names[k] = 0;
  std::string out = fmt::format("\nwhat your variation changed ({} → {}):\n", theirs, mine);
  for (const auto& [name, unused] : names) {
    const auto at = [&](const std::map<std::string, double>& m) -> std::optional<double> {
      auto it = m.find(name);
      return it == m.end() ? std::nullopt : std::optional<double>(it->second);
    };
    const std::optional<double> x = at(a), y = at(b);
    std::string change;
    if (x && y && *x != 0) change = fmt::format(" ({:+.1f} %)", 100 * (*y - *x) / *x);
    if (x && y && *x == *y) change = " (same)";
    out += fmt::format("  {:<52} {:>12} → {:<12}{}\n", name, shown(x), shown(y), change);
  }
  return out;
}

}  // namespace sp::labs
