// TraceReport's text and JSON forms (`shardproof trace check`, docs/formats/trace.md §"Checking").
#include <fmt/format.h>

#include "evidence/trace_check.h"

namespace sp::evidence {

using nlohmann::json;

std::string TraceReport::summary(size_t max_listed) const {
  std::string out = fmt::format("trace check {}: {}\n", dir.empty() ? "(in memory)" : dir,
                                consistent() ? "consistent" : "INCONSISTENT");
  out += fmt::format("  world size {}{}, {} rank files, {} records, {} groups\n", world_size,
                     topology_found ? "" : " (inferred: no topology.json)", rank_files, records, group_traffic.size());
  if (!consistent()) {
    out += fmt::format("  first mismatch: {}\n", mismatches[0].message);
    for (size_t i = 1; i < mismatches.size() && i <= max_listed; ++i)
      out += fmt::format("  also [{}]: {}\n", mismatches[i].kind, mismatches[i].message);
    if (mismatches.size() > max_listed + 1)
      out += fmt::format("  ... and {} more\n", mismatches.size() - max_listed - 1);
  }
  if (!prediction_found) out += "  traffic vs comm_predicted.json: not compared (no comm_predicted.json)\n";
  if (prediction_found) {
    out += fmt::format("  traffic vs comm_predicted.json: {} ({} cells of rank x step x group x phase)\n",
                       prediction_mismatches.empty() ? "as predicted" : "DIFFERS", prediction_cells);
    for (size_t i = 0; i < prediction_mismatches.size() && i <= max_listed; ++i)
      out += fmt::format("  {} {}\n", i == 0 ? "first difference:" : "also:", prediction_mismatches[i].message);
  }
  for (const std::string& w : warnings) out += fmt::format("  warning: {}\n", w);
  if (!group_traffic.empty()) {
    out += fmt::format("  {:<24} {:>10} {:>16} {:>16}\n", "group", "ops", "bytes", "wire_bytes");
    for (const auto& [group, t] : group_traffic)
      out += fmt::format("  {:<24} {:>10} {:>16} {:>16}\n", group, t.ops, t.bytes, t.wire_bytes);
  }
  return out;
}

nlohmann::json TraceReport::to_json() const {
  json j;
  j["dir"] = dir;
  j["consistent"] = consistent();
  j["world_size"] = world_size;
  j["topology_found"] = topology_found;
  j["rank_files"] = rank_files;
  j["records"] = records;
  j["warnings"] = warnings;
  json ms = json::array();
  for (const TraceMismatch& m : mismatches) {
    ms.push_back({{"kind", m.kind},
                  {"group", m.group},
                  {"seq", m.seq},
                  {"step", m.step},
                  {"phase", m.phase},
                  {"ranks", m.ranks},
                  {"field", m.field},
                  {"expected", m.expected},
                  {"actual", m.actual},
                  {"message", m.message}});
  }
  j["mismatches"] = std::move(ms);
  j["prediction_found"] = prediction_found;
  j["prediction_cells"] = prediction_cells;
  json pm = json::array();
  for (const TraceMismatch& m : prediction_mismatches)
    pm.push_back({{"rank", m.ranks.empty() ? -1 : m.ranks[0]},
                  {"step", m.step},
                  {"group", m.group},
                  {"phase", m.phase},
                  {"traced", m.actual},
                  {"predicted", m.expected},
                  {"message", m.message}});
  j["prediction_mismatches"] = std::move(pm);
  json traffic_list = json::array();
  for (const auto& [k, t] : traffic) {
    traffic_list.push_back({{"group", k.group},
                            {"step", k.step},
                            {"phase", comm::phase_name(k.phase)},
                            {"ops", t.ops},
                            {"bytes", t.bytes},
                            {"wire_bytes", t.wire_bytes}});
  }
  j["traffic"] = std::move(traffic_list);
  json groups = json::object();
  for (const auto& [g, t] : group_traffic)
    groups[g] = {{"ops", t.ops}, {"bytes", t.bytes}, {"wire_bytes", t.wire_bytes}};
  j["group_traffic"] = std::move(groups);
  return j;
}

}  // namespace sp::evidence
