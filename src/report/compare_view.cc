// The compare view (views.h): the strategies of a `shardproof compare` directory side by side, from
// the compare.json that command wrote (evidence/strategy_table.h: every figure is one a reader derived
// from the run's own evidence). Each row keeps what the charts need: the step time and its split, the
// bytes per axis traced vs predicted, peak memory per category, the equivalence class.
// Invariant: rows are compare.json's, in its order; only the absolute "dir" is dropped (DIR/<label>).
#include <fmt/format.h>

#include "core/json_io.h"
#include "report/views.h"

namespace sp::report {

View compare_view(const std::string& dir) {
  const RunDir top{.name = "compare", .path = dir, .rel = ""};
  View v{.id = "compare", .title = "Strategies side by side", .files = {top.label(evidence::kCompareFile)}};
  auto table = read_json_file(top.paths().file(evidence::kCompareFile));
  if (!table.ok()) {
    v.unreadable(top, evidence::kCompareFile, table.status());
    return v;
  }
  if (!table->contains("rows") || !(*table)["rows"].is_array()) {
    v.problems.push_back(top.label(evidence::kCompareFile) + ": no \"rows\" array");
    return v;
  }
  json rows = json::array();
  for (json row : (*table)["rows"]) {
    if (!row.is_object()) continue;
    row.erase("dir");
    // Peak memory per category: the largest measured (and predicted) peak over the ranks.
    json peak = json::object();
    if (row.contains("memory") && row["memory"].contains("ranks"))
      for (const json& r : row["memory"]["ranks"]) {
        const json cats = r.value("categories", json::object());
        for (const auto& [cat, c] : cats.items()) {
          json& p = peak[cat];
          if (p.is_null()) p = {{"measured_peak", int64_t{0}}, {"predicted_peak", int64_t{0}}};
          p["measured_peak"] = std::max(p["measured_peak"].get<int64_t>(), c.value("measured_peak", int64_t{0}));
          p["predicted_peak"] = std::max(p["predicted_peak"].get<int64_t>(), c.value("predicted_peak", int64_t{0}));
        }
      }
    row["peak_by_category"] = peak;
    rows.push_back(std::move(row));
  }
  v.data = {{"ok", table->value("ok", false)},
            {"preset", table->value("preset", "")},
            {"strategies", table->value("strategies", "")},
            {"sets", table->value("sets", json::array())},
            {"rows", rows}};
  return v;
}

}  // namespace sp::report
