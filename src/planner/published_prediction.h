// The planner against published throughput (docs/plan.md §6): each row of a published table (plan/
// published_runs.h) planned from the configuration it states, and its predicted step time set next to the
// time the row implies (the row's FLOPs by its own definition over its achieved FLOP/s). It is not a fit:
// nothing here reads the published throughput before predicting, and the GEMM efficiency is the planner's
// stated default unless the caller gives another. A GPT row is planned as its shape's engine counterpart
// (ModelShape::engine_counterpart), through the same evaluate_plan as every plan, priced as the row ran where
// the table says how: its schedule (PublishedTable::schedule) and its activations' dtype (::activations: the
// residual stream, the tensor-parallel sums and the pipeline messages, PlanQuery::stream_dtype). What a row
// does not state (micro-batch size, virtual stages) is searched: the fastest candidate that fits is the
// prediction. Invariant: every figure comes from evaluate_plan and flops.h; nothing is scaled toward the
// published one.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "plan/strategy.h"
#include "planner/cluster.h"
#include "planner/model_shape.h"
#include "planner/published_runs.h"

namespace sp::planner {

struct PublishedPrediction {
  PublishedRun run;
  ModelShape shape;              // the published shape (GPT)
  ModelShape counterpart;        // what was planned
  int candidates = 0;            // micro-batch × schedule × v the engine's rules accept for the stated tp, pp, dp
  int fitting = 0;               // of those, the ones that fit in the device's memory
  plan::Strategy chosen;         // the fastest fitting candidate
  double row_flops = 0;          // per iteration, by the table's definition (Narayanan et al. eq. 3 for the GPT shape)
  double implied_seconds = 0;    // row_flops / (tflops_per_gpu · gpus)
  double predicted_seconds = 0;  // the plan's step time
  double predicted_tflops_per_gpu = 0;  // row_flops / (predicted_seconds · gpus), comparable to the row's
  double error = 0;                     // predicted_seconds / implied_seconds − 1
  int64_t peak_bytes = 0, limit_bytes = 0;
  std::string over_category;  // empty when the chosen candidate fits; else the category over the limit
  double bubble = 0;          // the simulated pipeline's idle fraction
  std::string dominant;       // the largest communication part
  // The predicted step's terms (seconds): the busiest pipeline rank's GEMMs, the collectives inside its passes
  // (tp, ZeRO-3), the pipeline's idle time (bubble and transfers), and what follows the pipeline (the dp
  // gradient sync, the optimizer's collectives).
  double gemm_s = 0, pass_comm_s = 0, pipeline_idle_s = 0, after_pipeline_s = 0;
  // Which term dominates the error: the single counterfactual that brings the prediction closest to the
  // published time — "gemm efficiency" (the GEMMs at the efficiency that alone closes the error, gemm_efficiency_
  // to_close), "tp collectives hidden", "pipeline idle removed", "dp sync hidden" (each term set to zero, as
  // Megatron's overlap or a better schedule would) — and the error left under it.
  std::string error_term;
  double error_under_term = 0;
  double gemm_efficiency_to_close = 0;
  // The same chosen candidate as the engine would run it: the residual stream, the tensor-parallel sums and
  // the pipeline messages in fp32 (plan::RunPlan::stream_bytes 4); what the row's own precision changes. Absent
  // (engine_priced false) when the table states no activation dtype (the prediction is then the engine's).
  bool engine_priced = false;
  double engine_seconds = 0, engine_error = 0;
  bool engine_fits = false;
};

struct PublishedPredictionOptions {
  double efficiency = 0;  // fraction of the peak the GEMMs reach; (0, 1]
  // Non-empty: the GEMM efficiency is fitted on this row alone (its prediction made equal to its implied time,
  // by bisection) and every row is predicted at it; `efficiency` is then ignored. The only fitted factor.
  std::string fit_row;
  std::string dtype;  // which peak (the table's precision)
  std::vector<int64_t> micro_batch_sizes = {1, 2, 4, 8};
  // Interleaved candidates v ∈ {2, …, max} (pp > 1); 0: every v the row's layers allow, down to one layer per
  // chunk (v ≤ L/pp), since the table states none.
  int max_virtual_stages = 0;
};

// `node_type`: the cluster the table names (one node type); each row gets gpus / devices_per_node nodes.
// kInvalidArgument when a row's GPUs do not fill whole nodes, the dtype has no peak, or the engine's rules
// accept no candidate of a row. A row none of whose candidates fits is predicted anyway (its fastest
// candidate) and says which category is over the device's memory.
struct PublishedPredictions {
  std::vector<PublishedPrediction> rows;
  double efficiency = 0;  // the efficiency used: stated, or fitted on `fit_row`
  std::string fit_row;    // empty: stated
  int within_15_percent = 0;
  int engine_within_15_percent = 0;  // rows within ±15 % priced at the engine's fp32 stream (engine_error)
};
Result<PublishedPredictions> predict_published(const PublishedTable& table, const ClusterSpec& node_type,
                                               const PublishedPredictionOptions& options);

nlohmann::json published_prediction_to_json(const PublishedPrediction& p);

}  // namespace sp::planner
