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
//   tp under DTensor's plan (RecordedLayout::tp_modules): all_reduce(N·out) per RowwiseParallel module forward,
//                   all_reduce(N·in) per ColwiseParallel module backward
//   tp under sequence parallelism: each sum above becomes a reduce-scatter and an all-gather, plus the norms'
//                   gradient sums (add_sp_pass_traffic in traffic_model.cc says which, and in which dtype)
//   dp under FSDP2's units (RecordedLayout::units): all_gather(dp·padded) per unit per forward pass, again per
//                   backward pass if it reshards after forward; reduce_scatter(dp·padded) per unit in grad_sync
//   dp under DeepSpeed's ZeRO-1/2 (RecordedLayout::flat_zero): all_reduce(group numel) per group per reduction
//                   pass in grad_sync; all_gather(deepspeed_flat_numel) per group in optimizer; ZeRO-3:
//                   reduce_scatter(padded numel) per backward in grad_sync
//   pp:             send/recv of (N, C) per micro-batch per chunk boundary, each direction ((N/tp, C) under SP)
//   world:          loss all_reduce (M doubles), gradient summaries (norm), parameter summaries and the
//                   dp-replica digest exchange (evidence)
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

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

// A fully_shard unit of a foreign run whose ZeRO-2/3 is FSDP2's (torch.distributed.fsdp.fully_shard): before
// each forward pass it all-gathers its padded flat shard (dp × padded_numel elements out), again before each
// backward pass when it reshards after forward, and it reduce-scatters its gradients (dp × padded_numel in) once
// per step, in the step's last backward (docs/judge.md §3). padded_numel: fsdp2_padded_numel summed over the unit.
struct ShardedUnit {
  int64_t padded_numel = 0;
  bool reshard_after_forward = true;
  bool operator==(const ShardedUnit&) const = default;
};

// One rank's padded shard of a tensor under FSDP2: dim 0 cut by torch.chunk into dp pieces, each padded to the
// first (the largest): ⌈rows / dp⌉ · (the other dims' product) elements.
int64_t fsdp2_padded_numel(const std::vector<int64_t>& shape, int dp);

// DeepSpeed's ZeRO-1/2 (deepspeed/runtime/zero/stage_1_and_2.py) over dp, in place of the engine's ZeRO traffic:
// each parameter group is one flat buffer. A reduction pass all-reduces every gradient element of every group
// once (its buckets split the ops, never the bytes): ZeRO-2 at every backward, ZeRO-1 at each accumulation
// boundary. After the step every group's flat buffer, padded to deepspeed_flat_numel, is all-gathered.
// ZeRO-3 (stage3.py): one entry, Σ of each parameter padded to a multiple of dp (reduce_scatter_coalesced's
// padding), reduce-scattered at every backward; its parameter gathers are not modelled (no forward/backward dp
// traffic here, and none in the optimizer).
struct FlatZeroGroups {
  std::vector<int64_t> numel = {};  // elements of each group's parameters, in DeepSpeed's group order
  int64_t reductions = 0;           // gradient reduction passes of a rank in one step
  bool operator==(const FlatZeroGroups&) const = default;
};

// A DeepSpeed ZeRO-1/2 group's flat buffer: its numel rounded up to a multiple of 2·dp (nccl_start_alignment_factor
// 2 times the dp size; without parameter_alignment).
int64_t deepspeed_flat_numel(int64_t numel, int dp);

// The layout a foreign run records, as far as it changes what travels. What a tensor-parallel split keeps whole:
// the engine's own is vocabulary-parallel (the embedding's rows, with an all-reduce of its output; the LM head's
// rows with the vocabulary-parallel cross entropy's three sums and the all-reduce of its input gradient). A foreign
// run may keep either whole on every tp rank (Megatron-style splits that replicate them): no tp collective for it,
// and its gradient reduced over dp whole (the judge's recorded layout, docs/judge.md §3). Not modelled under
// sequence parallelism. units: non-empty for FSDP2's ZeRO (dp = the shard group, tp = pp = 1): its schedule
// replaces the engine's ZeRO traffic on the dp group (gathers per pass, reduction per unit, no optimizer gathers).
// flat_zero: non-empty for DeepSpeed's ZeRO-1/2 (dp only): its reductions and gathers replace the engine's ZeRO's.
// units under tp > 1 (FSDP2 over tensor-parallel shards): each padded_numel is of the tp-local shards.
// tp_modules: non-empty for DTensor's ColwiseParallel / RowwiseParallel plan (pp 1, no sequence parallelism, the
// embedding and head whole): per micro-batch pass, an all-reduce of each RowwiseParallel module's output (N × its
// out_features) forward and of each ColwiseParallel module's input gradient (N × its in_features) backward, in place
// of the engine's Megatron sums (two per block each way: a block's input gradients added before one all-reduce).
struct TpModules {
  std::vector<int64_t> rowwise_out = {}, colwise_in = {};
  bool empty() const { return rowwise_out.empty() && colwise_in.empty(); }
  bool operator==(const TpModules&) const = default;
};
struct RecordedLayout {
  bool embedding_split = true;
  bool head_split = true;
  std::vector<ShardedUnit> units = {};
  FlatZeroGroups flat_zero = {};
  TpModules tp_modules = {};
};

// Predicted traffic of world rank `rank` in one training step, per op (the model itself).
StepOps predict_step_ops(const RunPlan& plan, const comm::ProcessGrid& grid, int rank, bool checksums, bool eval_after,
                         const RecordedLayout& layout = {});
// The same summed over ops (with checksums taken or not, and
// evaluation after the step or not).
StepTraffic predict_step_traffic(const RunPlan& plan, const comm::ProcessGrid& grid, int rank, bool checksums,
                                 bool eval_after, const RecordedLayout& layout = {});
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
