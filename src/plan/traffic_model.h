// Communication model: the collective and p2p traffic one rank must issue in each step, per group
// and phase, predicted from the plan and the documented algorithms alone (docs/comm.md §4,
// docs/equivalence.md) — not from a trace. The trace check compares it with what was traced, so a
// skipped all-reduce, an extra collective or a wrong message size is an error even when every rank
// agrees with every other. Bytes follow the trace's payload definition (docs/formats/trace.md).
//   dp, grad_sync:  per unit of n floats: deterministic all-reduce = all_to_all(n) + all_gather(n);
//                   fast all_reduce(n); ZeRO ≥ 1: all_to_all(n) (deterministic) or reduce_scatter(n)
//   dp, optimizer:  ZeRO-1/2: all_gather(n) per unit      dp, forward/backward/eval: ZeRO-3 all_gather(n)
//                   per unit acquisition (once before its forward, once before its backward)
//   tp, forward/backward/eval: 2 per block forward (o_proj, down_proj), 2 per block backward
//                   (q/k/v and gate/up input gradients), +1 forward for the embedding, head: max, Σexp,
//                   target logit (N each) forward and 1 (N·C) backward; recompute replays the forward ones
//   tp under sequence parallelism: each sum above becomes a reduce-scatter and an all-gather, plus the norms'
//                   gradient sums (add_sp_pass_traffic in traffic_model.cc says which, and in which dtype)
//   pp:             send/recv of (N, C) per micro-batch per chunk boundary, each direction ((N/tp, C) under SP)
//   world:          loss all_reduce (M doubles), gradient summaries (norm), parameter summaries and the
//                   dp-replica digest exchange (evidence)
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "comm/process_grid.h"
#include "evidence/comm_prediction.h"
#include "plan/run_plan.h"

namespace sp::plan {

struct Traffic {
  int64_t ops = 0;
  int64_t bytes = 0;
  bool operator==(const Traffic&) const = default;
};

// (group name, phase name) → traffic of one step on this rank: what the trace check compares.
using StepTraffic = std::map<std::pair<std::string, std::string>, Traffic>;
// (group name, phase name, op) → traffic of one step on this rank, op as the trace names it
// ("all_reduce", "all_to_all", "all_gather", "reduce_scatter", "send", "recv"): what the planner prices.
using StepOps = std::map<std::tuple<std::string, std::string, std::string>, Traffic>;

// What a tensor-parallel split keeps whole. The engine's own is vocabulary-parallel (the embedding's rows, with
// an all-reduce of its output; the LM head's rows with the vocabulary-parallel cross entropy's three sums and the
// all-reduce of its input gradient). A foreign run may keep either whole on every tp rank (Megatron-style splits
// that replicate them): no tp collective for it, and its gradient reduced over dp whole (the judge's recorded
// layout, docs/judge.md §3). Not modelled under sequence parallelism.
struct TpLayout {
  bool embedding_split = true;
  bool head_split = true;
};

// Predicted traffic of world rank `rank` in one training step, per op (the model itself).
StepOps predict_step_ops(const RunPlan& plan, const comm::ProcessGrid& grid, int rank, bool checksums, bool eval_after,
                         const TpLayout& layout = {});
// The same summed over ops (with checksums taken or not, and
// evaluation after the step or not).
StepTraffic predict_step_traffic(const RunPlan& plan, const comm::ProcessGrid& grid, int rank, bool checksums,
                                 bool eval_after, const TpLayout& layout = {});
// Which steps take checksums and are followed by an evaluation: the trainer's loop and the prediction
// both follow it (evidence/comm_prediction.h).
evidence::StepSchedule step_schedule(const config::RunConfig& config);
// comm_predicted.json (format 2, docs/formats/comm_predicted.md): every rank's traffic per step class
// (evidence::kStepClasses: the evaluation before training, and a step with or without checksums, with
// or without an evaluation after it) and the schedule that maps each step to its class:
// {"format_version", "schedule": {steps, checksum_every, eval_every},
//  "ranks": [{"rank", "classes": {"<class>": {group: {phase: {ops, bytes}}}}}]}.
// O(world · classes), independent of train.steps. The trainer writes it; the gate re-derives it from
// the contract with this same function.
nlohmann::json predict_run_traffic(const RunPlan& plan, const comm::ProcessGrid& grid);

}  // namespace sp::plan
