// The parallel run against its plan (criteria_rows.h): topology, traces, traffic and the memory ledger.
#include <fmt/format.h>

#include "comm/process_grid.h"
#include "comm/topology.h"
#include "core/json_io.h"
#include "plan/traffic_model.h"
#include "proof/criteria_rows.h"

namespace sp::proof::criterion {

using nlohmann::json;
using namespace evidence;  // file names (bundle_paths.h)

// 3. The parallel stage's topology re-derives a complete grid of the contract's dp·tp·pp.
Criterion topology_valid(const GateContext& c) {
  const config::ParallelConfig& pc = c.config.parallel;
  auto topo = read_json_file(c.bundle->paths().parallel().topology());
  Status s = topo.ok() ? comm::validate_topology(*topo) : topo.status();
  if (s.ok() && topo->value("world_size", 0) != pc.world())
    s = corrupt("world_size {} ≠ dp·tp·pp = {}", topo->value("world_size", 0), pc.world());
  return make("topology valid", s.ok(),
              fmt::format("dp {} × tp {} × pp {} = {} ranks", pc.dp, pc.tp, pc.pp, pc.world()),
              "a complete, consistent grid", stage_file(kParallelStage, kTopologyFile), s.message());
}

// 4. Traces: every group's members issued the same collectives.
Criterion traces_consistent(const GateContext& c) {
  const auto& r = c.parallel_trace;
  const bool ok = r.ok() && r->consistent();
  return make("traces consistent", ok,
              r.ok() ? fmt::format("{} records, {} mismatches", r->records, r->mismatches.size()) : "unreadable",
              "every group's members issued the same collectives", stage_dir(kParallelStage, kTraceDir),
              !r.ok() ? r.status().message() : (r->mismatches.empty() ? "" : r->mismatches.front().message));
}

// 5. ...and equal to the plan's prediction.
Criterion traced_bytes(const GateContext& c) {
  const auto& r = c.parallel_trace;
  const bool ok = r.ok() && r->matches_prediction();
  int64_t bytes = 0;
  if (r.ok())
    for (const auto& [grp, t] : r->group_traffic) bytes += t.bytes;
  return make(
      "traced bytes equal the prediction", ok,
      r.ok() ? fmt::format("{} cells, {} differ; {} bytes traced", r->prediction_cells, r->prediction_mismatches.size(),
                           bytes)
             : "unreadable",
      "ops and bytes per rank, step, group and phase as comm_model predicts",
      fmt::format("{}, {}", stage_dir(kParallelStage, kTraceDir), stage_file(kParallelStage, kCommPredictedFile)),
      !r.ok() ? r.status().message()
              : (!r->prediction_mismatches.empty() ? r->prediction_mismatches.front().message
                                                   : (r->prediction_found ? "" : "no comm_predicted.json")));
}

// 6. The prediction file itself is the plan's, not an edited one.
Criterion prediction_rederived(const GateContext& c) {
  const config::ParallelConfig& pc = c.config.parallel;
  auto grid = comm::ProcessGrid::create(pc.dp, pc.tp, pc.pp, pc.axis_order, pc.workers());  // the workers' grid
  auto stored = read_json_file(c.bundle->paths().parallel().comm_predicted());
  const bool same = grid.ok() && stored.ok() && *stored == plan::predict_run_traffic(c.plan, *grid);
  return make("prediction re-derived from the contract", same, same ? "equal" : "differs",
              "comm_predicted.json = comm_model(contract)",
              fmt::format("{}, {}", stage_file(kParallelStage, kCommPredictedFile), kContractFile),
              !grid.ok() ? grid.status().message()
                         : (stored.ok() ? fmt::format("{} is not the plan's prediction",
                                                      stage_file(kParallelStage, kCommPredictedFile))
                                        : stored.status().message()));
}

// 7. Memory ledger: measured = predicted on every rank, within the budget.
Criterion ledger_equal(const GateContext& c) {
  auto ledger = read_json_file(c.bundle->paths().parallel().ledger());
  const bool equal = ledger.ok() && ledger->value("equal", false);
  const double budget = ledger.ok() ? ledger->value("budget_bytes", 0.0) : 0;
  const double peak = ledger.ok() ? ledger->value("max_peak_bytes", 0.0) : 0;
  const bool fits = budget <= 0 || peak <= budget;
  return make("memory ledger equals the prediction", equal && fits,
              fmt::format("max peak {:.1f} MB per rank{}", peak / 1e6, equal ? ", every category equal" : ", DIFFERS"),
              budget > 0 ? fmt::format("equal, peak ≤ {:.1f} MB", budget / 1e6) : "equal (no budget set)",
              stage_file(kParallelStage, kLedgerFile), ledger.ok() ? "" : ledger.status().message());
}

}  // namespace sp::proof::criterion
