// One case of a plan lab (docs/labs.md §LSL-I) as its files say it: CASE/plan.json (docs/plan.md §8) and
// CASE/report.html, read against what the lab expects. The expectations (which model, strategy, clusters and
// placements, which placement is the fault) are the lab catalogue's (configs/labs/catalogue.toml), never the
// files': a plan.json of another cluster, model or strategy is a case that was not evaluated.
// Not the planner: nothing here evaluates a plan; the criteria over these records are plan_lab_criteria.h.
// Invariant: a record is a pure function of the case's files and the spec; a missing or unreadable file
// is a `problem`, never an exception or a default value.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/strategy.h"

namespace sp::labs {

// A plan lab's contrast (kind = "plan", docs/formats/labs.md): one strategy of one model on every
// (cluster, placement) pair; `fault_placement` is the single fault, the placement the topology check must flag.
struct PlanLabSpec {
  std::string model{};                    // a named shape (`shardproof plan list`): "llama-7b"
  std::string strategy{};                 // its name (plan/strategy.h): "dp4-tp4-pp2-zero1"
  plan::Strategy parsed{};                // the name over the engine's defaults around `model` (catalogue reader)
  int nodes = 0;                          // nodes of every cluster (dp·tp·pp = nodes × devices per node)
  int64_t global_batch = 0;               // sequences per step
  std::vector<std::string> clusters{};    // cluster presets, configs/clusters/NAME.toml (at least two)
  std::vector<std::string> placements{};  // rank-grid axis orders, "tp-dp-pp" (at least two, distinct)
  std::string fault_placement{};          // one of `placements`
};

// One case of a plan lab: a cluster preset under one placement (the rank grid's axis order).
struct PlanLabCase {
  std::string cluster;                                           // "dgx-a100"
  std::string placement;                                         // "tp-dp-pp"
  std::string dir() const { return cluster + "-" + placement; }  // the case's folder in the lab's DIR
  std::string plan_file() const;                                 // "dgx-a100-tp-dp-pp/plan.json"
};

// Every (cluster, placement) of the lab, clusters outer, in catalogue order.
std::vector<PlanLabCase> plan_lab_cases(const PlanLabSpec& spec);

// What the criteria read from one case's plan.json; `problem` is why the case does not count as evaluated.
struct PlanLabRecord {
  PlanLabCase c;
  std::string problem;  // empty: read and consistent with the spec
  double step_s = 0, pass_comm_s = 0, mfu = 0;
  int64_t peak_bytes = 0, limit_bytes = 0;
  bool fits = false;
  std::string dominant, dominant_axis, dominant_link;  // "tp backward on inter-node infiniband", "tp", "inter-node …"
  std::vector<std::string> warnings;
  bool tp_crosses_nodes = false;
  std::string tp_link;
  nlohmann::json plan;  // plan.json as read (null when unreadable), for the re-derivation
  bool ok() const { return problem.empty(); }
};

// Reads case `c` under the lab's directory `dir`: both files must exist, plan.json must be the spec's
// (kind, cluster, nodes, model, strategy grid, axis order, global batch), its step time finite and > 0, every
// time of its step finite and ≥ 0, its MFU and HFU within [0, 1] and its memory figures non-negative (an
// impossible value is a problem, whatever the planner would say).
PlanLabRecord read_plan_lab_case(const PlanLabSpec& spec, const PlanLabCase& c, const std::string& dir);

}  // namespace sp::labs
