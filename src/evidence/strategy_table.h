// The strategy table of `shardproof compare`: one row per run directory, built from its evidence
// files alone (metrics.jsonl, checksums.jsonl, trace/, comm_predicted.json, ledger.json, timeline/,
// contract.json, topology.json), rendered as Markdown and JSON (docs/compare.md §"Columns").
// It does not launch runs (cmd_compare.cc does) and does not judge tolerances itself: equivalence is
// compare_checksums (compare.h), traffic is check_trace_dir (trace_check.h), the bubble is bubble.h.
// Invariant: a row either holds a run's figures or an `error` saying why there are none.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "evidence/bubble.h"

namespace sp::evidence {

// Payload bytes of one group (or one axis: the sum of its groups) in one training step: phases
// forward, backward, grad_sync, optimizer and evidence (not setup, eval, checkpoint), summed over
// every member's records as trace check counts them (a p2p message counts on both ends).
struct StepBytes {
  int64_t traced = 0;
  int64_t predicted = -1;  // −1: no comm_predicted.json
};

struct MemoryCell {
  int64_t measured_peak = 0, predicted_peak = 0;
};

struct RankMemory {
  int rank = 0;
  std::string coords;
  bool equal = false;
  std::map<std::string, MemoryCell> categories;  // param, grad, optim, activation, comm, workspace, io
  MemoryCell total;
};

struct StrategyRow {
  // -- what ran --
  std::string label, dir;
  std::vector<std::string> overrides;
  int world = 0, dp = 1, tp = 1, pp = 1, zero = 0, virtual_stages = 1;
  std::string schedule, reduction, recompute;
  std::string error;  // non-empty: no figures (config rejected, run failed, evidence unreadable)
  int exit_code = 0;  // the run's exit code (−1: not run)

  // -- time (metrics.jsonl: rank 0; timeline: bubble.h) --
  int64_t steps = 0;
  double step_s = 0;        // median over steps ≥ 1 of step_s
  double ratio_vs_ref = 0;  // step_s / the reference's step_s (0: no reference time)
  double compute_s = 0;     // median of compute_s (rank 0's forward + backward)
  bool has_bubble = false;
  BubbleReport bubble;

  // -- traffic --
  bool trace_found = false, trace_consistent = false, prediction_found = false, traced_equals_predicted = false;
  int64_t prediction_mismatches = 0;
  std::string first_trace_problem;
  int64_t bytes_step = -1;                       // the training step whose bytes are shown (the last one)
  std::map<std::string, StepBytes> group_bytes;  // per group name, at bytes_step
  std::map<std::string, StepBytes> axis_bytes;   // per axis (dp, tp, pp, world, ...), summed over groups
  // Per world rank, at bytes_step: the bytes it sends plus receives as comm_predicted.json says (which
  // trace check holds equal to the trace): shows a parameter server's concentration (docs/ps.md).
  std::map<int, int64_t> rank_bytes;

  // -- memory (ledger.json) --
  bool ledger_found = false, ledger_equal = false;
  int64_t max_peak_bytes = 0;
  std::vector<RankMemory> memory;

  // -- equivalence against the reference (compare.h) --
  std::string equivalence;  // bitwise-equal, within-tolerance, divergent, reference, or "no reference"
  double max_rel_loss = 0, max_rel_param = 0, max_rel_grad_first = 0, max_rel_grad_later = 0;
  std::string first_divergence;

  // -- losses --
  double final_loss = 0, final_eval_loss = 0;
  bool has_eval_loss = false;

  // The row's verdict: ran, not divergent, trace consistent, traced = predicted (when predicted),
  // ledger measured = predicted.
  bool ok() const;
  nlohmann::json to_json() const;
};

// Fills a row from DIR. `reference_dir` empty: this is the reference (equivalence "reference"); else
// the equivalence fields are the caller's (cli/cmd_compare.cc asks proof::compare_runs, which knows
// the class the contract promises). Never fails: unreadable evidence becomes `error` (or a note in the
// section it concerns).
StrategyRow strategy_row_of_run(const std::string& dir, const std::string& reference_dir);
// Sets ratio_vs_ref from the reference row (rows[0] when it is the reference and has a time).
void fill_ratios(std::vector<StrategyRow>& rows);

std::string strategy_table_markdown(const std::vector<StrategyRow>& rows, const std::string& title);
nlohmann::json strategy_table_json(const std::vector<StrategyRow>& rows);

}  // namespace sp::evidence
