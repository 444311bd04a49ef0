// The parallel run against its plan (criteria_rows.h): topology, traces, traffic and the memory ledger.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "comm/process_grid.h"
#include "comm/topology.h"
#include "core/json_io.h"
#include "plan/ledger_model.h"
#include "plan/traffic_model.h"
#include "proof/criteria_rows.h"

namespace sp::proof::criterion {

using nlohmann::json;
using namespace evidence;           // file names (bundle_paths.h)
constexpr double kMiB = 1048576.0;  // the one unit of bytes in human-facing figures (issue 33)

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
  const json want = grid.ok() ? plan::predict_run_traffic(c.plan, *grid) : json();
  const bool same = grid.ok() && stored.ok() && *stored == want;
  const std::string file = stage_file(kParallelStage, kCommPredictedFile);
  std::string where = fmt::format("{} is not the plan's prediction", file);
  if (!same && stored.ok() && want.contains("ranks")) {  // name the first rank and step class that differ
    const json have = stored->value("ranks", json::array());
    for (size_t i = 0; i < want["ranks"].size(); ++i) {
      const json mine = i < have.size() ? have[i] : json();
      if (mine == want["ranks"][i]) continue;
      std::string cls = "its entry";
      const json classes = want["ranks"][i].value("classes", json::object());
      const json stored_classes = mine.is_object() ? mine.value("classes", json::object()) : json::object();
      for (const auto& [k, v] : classes.items())
        if (stored_classes.value(k, json()) != v) {
          cls = fmt::format("step class '{}'", k);
          break;
        }
      where = fmt::format("{}: rank {}, {} is not the plan's prediction", file, i, cls);
      break;
    }
  }
  return make("prediction re-derived from the contract", same, same ? "equal" : "differs",
              "comm_predicted.json = comm_model(contract)", fmt::format("{}, {}", file, kContractFile),
              !grid.ok() ? grid.status().message() : (stored.ok() ? where : stored.status().message()));
}

// 7. Memory ledger: on every rank of the parallel run, every category's measured live and peak bytes equal the
//    ledger model's prediction for that rank, re-derived here from the contract (plan/ledger_model.h: the same
//    function the engine checks itself against), and the peak is within the budget. The file's own "equal"
//    flags and predicted numbers are not trusted.
Criterion ledger_equal(const GateContext& c) {
  const std::string file = stage_file(kParallelStage, kLedgerFile);
  auto ledger = read_json_file(c.bundle->paths().parallel().ledger());
  const config::ParallelConfig& pc = c.config.parallel;
  auto grid = comm::ProcessGrid::create(pc.dp, pc.tp, pc.pp, pc.axis_order, pc.workers());
  std::string problem = !ledger.ok() ? ledger.status().message() : !grid.ok() ? grid.status().message() : "";
  double peak = 0;
  std::set<int> seen;
  const json ranks = ledger.ok() ? ledger->value("ranks", json::array()) : json::array();
  for (const json& r : ranks) {
    if (!problem.empty()) break;
    const int rank = r.value("rank", -1);
    if (rank < 0 || rank >= pc.world() || !seen.insert(rank).second) {
      problem = fmt::format("{}: rank {} is not a rank of the run, or appears twice", file, rank);
      break;
    }
    const plan::LedgerPrediction want =
        plan::predict_ledger(plan::rank_ledger_input(c.plan, *grid, rank, c.config.train.eval_batches));
    for (size_t k = 0; k < kCategoryCount && problem.empty(); ++k) {
      const std::string cat(category_name(static_cast<Category>(k)));
      const json got = r.contains("categories") ? r["categories"].value(cat, json()) : json();
      const MemoryLedger::Bytes& w = want.by_category[k];
      const auto field = [&](const char* key) { return got.is_object() ? got.value(key, int64_t{-1}) : -1; };
      for (const auto& [key, value] : {std::pair{"measured_live", w.live}, std::pair{"measured_peak", w.peak},
                                       std::pair{"predicted_live", w.live}, std::pair{"predicted_peak", w.peak}})
        if (field(key) != value && problem.empty())
          problem = fmt::format("{}: rank {} ({}), {} {}: {}, the ledger model predicts {} for this rank", file, rank,
                                r.value("coords", std::string()), cat, key, field(key), value);
    }
    // The per-name comparison the engine made at run time: a difference it recorded fails too.
    if (problem.empty() && !r.value("equal", false)) {
      std::string name = "its total";
      const json tensors = r.value("tensors", json::object());
      for (const auto& [n, e] : tensors.items())
        if (!e.value("equal", true)) {
          name = n;
          break;
        }
      problem = fmt::format("{}: rank {} ({}): the run measured {} differing from the prediction", file, rank,
                            r.value("coords", std::string()), name);
    }
    peak = std::max(peak, r.contains("total") ? r["total"].value("measured_peak", 0.0) : 0.0);
  }
  if (problem.empty() && ledger.ok() && !ledger->value("equal", false))
    problem = fmt::format("{}: \"equal\" is false: the run measured a difference from the prediction", file);
  if (problem.empty() && static_cast<int>(seen.size()) != pc.world())
    problem = fmt::format("{}: {} of the run's {} ranks recorded", file, seen.size(), pc.world());
  const double budget = ledger.ok() ? ledger->value("budget_bytes", 0.0) : 0;
  const bool fits = budget <= 0 || peak <= budget;
  if (problem.empty() && !fits)
    problem = fmt::format("{}: a peak of {:.1f} MiB exceeds the budget {:.1f} MiB", file, peak / kMiB, budget / kMiB);
  return make("memory ledger equals the prediction", problem.empty(),
              fmt::format("max peak {:.1f} MiB per rank{}", peak / kMiB,
                          problem.empty() ? ", every category equal" : ", DIFFERS"),
              budget > 0 ? fmt::format("equal to the ledger model on every rank, peak ≤ {:.1f} MiB", budget / kMiB)
                         : "equal to the ledger model on every rank and category (no budget set)",
              file, problem);
}

}  // namespace sp::proof::criterion
