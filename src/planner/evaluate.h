// Plan evaluation: what one run configuration costs on a described cluster, from the engine's own models —
// memory per rank per category from the ledger model (plan/ledger_model.h) and bytes per rank per group,
// phase and op from the traffic model (plan/traffic_model.h), the very functions every run is checked
// against to the byte; time from pricing those bytes with the α–β model on the link each group crosses
// (planner/group_links.h, planner/collective_time.h), the GEMM FLOPs at a stated fraction of the device's peak
// (planner/flops.h), and the pipeline phase simulated over the engine's schedule (planner/pipeline_sim.h).
// It is not a second model of the engine: nothing here counts a byte. Assumptions: docs/plan.md §time.
// Invariant: for a configuration the engine can run, every evaluated rank's memory and traffic equal what
// that run's ledger and trace measure (tests/plan/plan_exact.py checks it against real bundles).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/run_config.h"
#include "core/status.h"
#include "plan/ledger_model.h"
#include "plan/traffic_model.h"
#include "planner/cluster.h"
#include "planner/group_links.h"
#include "planner/kernel_costs.h"
#include "planner/model_shape.h"
#include "planner/pipeline_sim.h"
#include "planner/search.h"

namespace sp::planner {

struct PlanQuery {
  ClusterSpec cluster;       // one rank per device: its device count is the world size
  config::RunConfig config;  // the run: model, train shape (global batch, micro-batch, seq_len) and strategy
  std::string dtype;         // the peak the GEMMs run at (a key of cluster.peak_flops, e.g. "fp32", "tf32")
  double efficiency = 0;     // fraction of that peak the GEMMs reach, in (0, 1]
  // The cluster's measured rates (cluster.measured) price the compute when it has them, unless the caller
  // states an efficiency instead (`plan --efficiency`): then GEMMs only, at `efficiency`, as for a preset.
  bool use_measured = true;
  // The residual stream's dtype and what carries it between ranks (tp sums, pipeline messages): the engine's
  // fp32 unless a published 16-bit run is priced as it ran (plan published; plan::RunPlan::stream_bytes).
  DType stream_dtype = DType::kF32;
  bool named_memory = true;      // per-tensor memory entries (the search turns them off: totals are the same)
  bool pipeline_actions = true;  // keep the simulated pipeline's intervals (the search turns them off)
  bool all_ranks = false;        // evaluate every rank, whatever the world size
  int every_rank_up_to = 64;     // else every rank of a world this small, one per pipeline stage beyond
};

struct RankEvaluation {
  int rank = 0;
  comm::Coords coords;
  plan::LedgerPrediction memory;
  plan::StepOps traffic;  // one training step without checksums or evaluation
};

struct PricedTraffic {
  std::string axis;   // "dp", "tp", "pp", "world", "ps"
  std::string phase;  // the trace's phase
  std::string op;     // the trace's op
  int64_t ops = 0;
  int64_t bytes = 0;  // per rank per step, the trace's payload definition
  double seconds = 0;
  std::string link;
};

struct PlanEvaluation {
  plan::RunPlan plan;
  std::string grid;                                      // comm::ProcessGrid::describe()
  std::vector<std::pair<std::string, GroupLink>> links;  // tp, dp, pp, world
  // The topology check: a tensor-parallel group that crosses nodes although it would fit in one (every
  // all-reduce of every layer then runs on the network), named with both links and the axis order that fixes
  // it; empty for a sound placement.
  std::vector<std::string> placement_warnings;
  std::vector<RankEvaluation> ranks;
  // Memory: the largest evaluated peak against the device's memory.
  int64_t peak_bytes = 0, limit_bytes = 0;
  int largest_rank = 0;
  std::string largest_category;  // the category with the largest peak on the largest rank
  bool fits() const { return peak_bytes <= limit_bytes; }
  // plan::Traffic of the busiest evaluated rank per (axis, phase, op), priced.
  std::vector<PricedTraffic> traffic;
  // Time.
  double model_flops = 0, hardware_flops = 0;  // per step, all ranks
  PipelineTimes pipeline_times;                // what was simulated
  PipelineSimulation pipeline;
  double closed_form_bubble = 0;  // (p−1)/(v·m+p−1)
  double compute_seconds = 0;     // compute time of the busiest pp rank (every micro-batch)
  // With measured device rates (cluster.measured, planner/kernel_costs.h): the busiest pp rank's compute split
  // into GEMMs, attention and memory-bound kernels; without them all of compute_seconds is GEMMs.
  KernelTimes compute_split;
  // The same for every pp rank (by pp coordinate) with its pass communication: what each stage's measured time
  // split (timeline/rank-*.jsonl) is compared with (bench/plan_vs_measured.py).
  std::vector<KernelTimes> compute_by_pp_rank;
  std::vector<double> pass_comm_by_pp_rank;
  double optimizer_seconds = 0;       // after the pipeline: gradient norm, clipping, AdamW, 16-bit casts
  bool measured_rates = false;        // the cluster's measured rates priced the compute
  double pass_comm_seconds = 0;       // tp and ZeRO-3 collectives inside the passes, busiest pp rank
  double after_pipeline_seconds = 0;  // grad_sync, optimizer and evidence phases (no overlap)
  // The evidence (checksums, the replica digest, the trace's payload digests), with measured rates; 0 without.
  double evidence_seconds = 0;
  double step_seconds = 0;  // pipeline makespan + after_pipeline_seconds + optimizer_seconds + evidence_seconds
  double tokens_per_second = 0, mfu = 0, hfu = 0;
  std::string dominant;  // the largest communication part: "dp grad_sync on inter-node infiniband"
  std::vector<std::string> assumptions;
};

// The fraction of the peak FLOP/s the GEMMs are assumed to reach when nothing says otherwise (`plan
// --efficiency`): a stated assumption, printed with every plan, not a fitted value.
inline constexpr double kDefaultGemmEfficiency = 0.5;

// The engine's defaults around a shape with no run configuration of its own (a named shape, a Hugging Face
// config): one step, micro-batch 1, seq_len min(max_seq, 2048), no evaluation and no checksums,
// parallel.reduction = "fast" (a cluster reduces with its library's all-reduce), the given axis order. The
// global batch is left 0 for the caller to set. The shape must be of the llama family (engine_counterpart()).
config::RunConfig run_config_around(const ModelShape& shape, const std::string& axis_order);

// kInvalidArgument (exit 2) for a configuration the engine refuses (every rule, as plan::RunPlan::make says),
// a placement that does not match the cluster, a dtype without a peak, or an efficiency outside (0, 1].
// The assumptions under the evaluation's figures (evaluate_assumptions.cc): the time model's, how compute was
// priced (measured rates or a stated efficiency at `peak` FLOP/s), the states' precision and accumulation
// buffers, the order of the passes.
std::vector<std::string> evaluation_assumptions(const PlanQuery& q, const PlanEvaluation& e, double peak);

Result<PlanEvaluation> evaluate_plan(const PlanQuery& query);

// The JSON of docs/plan.md §8 ("shardproof plan --json").
nlohmann::json plan_evaluation_to_json(const PlanQuery& query, const PlanEvaluation& e);

// The search's evaluators backed by evaluate_plan: the engine's rules (plan::RunPlan::violations), its memory
// and its time, for the model and train shape in `base`.
StrategyEvaluators engine_evaluators(const PlanQuery& base);

}  // namespace sp::planner
