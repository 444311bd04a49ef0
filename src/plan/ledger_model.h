// Ledger model: the predicted memory of one rank, derived from the configuration and the documented
// allocation policy alone (docs/memory.md), not from the engine's allocator. It replays the events
// that allocate or free memory — setup, the pipeline schedule's forwards and backwards, ZeRO-3
// gathers, gradient-accumulation buffers (the canonical tree; one per unit under the fast reduction),
// evaluation — with sizes from the shape formulas, and reports peak bytes per category, per named
// tensor and in total. The gate requires measurement == prediction to the byte: any allocation the
// policy does not explain, or a buffer freed later than documented, shows up as a difference.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "comm/process_grid.h"
#include "model/llama_config.h"
#include "model/llama_stage.h"
#include "plan/run_plan.h"
#include "plan/schedule.h"
#include "tensor/memory_ledger.h"

namespace sp::plan {

struct LedgerModelInput {
  model::LlamaConfig model;
  int dp = 1, tp = 1, pp = 1;
  int dp_rank = 0, tp_rank = 0;
  int zero = 0;
  bool deterministic = true;
  // DP syncs in flight at once (parallel.overlap_buckets; 0 at dp = 1, where nothing is synchronized): one
  // staging buffer per slot, and ZeRO-2/3 free a unit's full buffers when its sync completes (GradStore).
  int overlap_buckets = 0;
  int64_t micro_batch_size = 1;  // B
  int64_t seq_len = 1;           // T
  model::Recompute recompute = model::Recompute::kNone;
  // Sequence parallelism: the residual stream, mid, the norms' rstd and scratch.dres hold N/tp token rows
  // (docs/memory.md §"Sequence parallelism"); the tp staging exists in either reduction mode.
  bool sequence_parallel = false;
  // Mixed precision (docs/memory.md §"What phase 2 changes"): bytes per element of the working weights
  // and 16-bit activations (4 in fp32, 2 in bf16/fp16), of the gradient buffers (train.grad_dtype), and
  // the resolved 16-bit GEMM backend (sizes the stage's scratch.gemm16).
  int64_t param_bytes = 4;
  int64_t grad_bytes = 4;
  int64_t stream_bytes = 4;  // the residual stream and the tp sums' staging (RunPlan::stream_bytes)
  kernels::Gemm16Kind gemm16 = kernels::Gemm16Kind::kAuto;
  bool mixed() const { return param_bytes != 4; }
  struct Chunk {
    int layer_begin = 0, layer_end = 0;
    bool first = false, last = false;
  };
  std::vector<Chunk> chunks;  // by virtual stage
  // ZB-H1's split backward: each slot also holds its blocks' norms' weight gradients between B and W
  // ("act.s<i>.wnorm"); a last chunk holds one set of head activations ("act.head.*") instead of one per slot.
  bool split_backward = false;
  using Action = PipeAction;          // the schedule's own actions (plan/schedule.h)
  std::vector<Action> train_actions;  // one step
  int64_t local_micro_batches = 1;    // k
  std::vector<Action> eval_actions;   // forward only; empty when there is no eval set on this rank
  int64_t steps = 1;
  int64_t eval_every = 0;  // evaluation after step s when (s + 1) % eval_every == 0, and after the last
  // Parameter server (docs/ps.md). A worker (dp = 1 here: its dp axis is one rank) owns no optimizer
  // state; a server runs no micro-batch and holds only its pieces: predict_ps_server_ledger.
  bool owns_optimizer = true;
  struct PsPiece {
    int unit = 0;      // unit id
    int64_t size = 0;  // elements
  };
  std::vector<PsPiece> ps_server_pieces;  // non-empty: this rank is a server
  int ps_workers = 0;                     // W
  // Per-name entries in the prediction; the planner's search needs only the totals and categories, which
  // are the same either way, and skips the names' bookkeeping.
  bool named = true;
};

struct LedgerPrediction {
  MemoryLedger::Bytes total;
  std::array<MemoryLedger::Bytes, kCategoryCount> by_category{};
  std::map<std::string, MemoryLedger::Entry> entries;
};

// O(1) in in.steps: the first steps are replayed event by event until the state repeats (no live
// byte, peak, pool or buffer changes in a step, with or without an evaluation after it); the rest only
// repeat allocation counts, added in closed form. Equal to predict_ledger_step_by_step, its naive twin.
LedgerPrediction predict_ledger(const LedgerModelInput& in);
// A parameter server's memory (predict_ledger calls it for a server's input): per piece its parameters,
// summed gradient and both moments, and the push staging of W copies of the largest piece.
LedgerPrediction predict_ps_server_ledger(const LedgerModelInput& in);
// Every step replayed (O(steps)): the oracle of predict_ledger in tests.
LedgerPrediction predict_ledger_step_by_step(const LedgerModelInput& in);

// What the ledger model needs for the rank at `coords`, from the plan alone: its chunks, its schedule
// of one training step, and the forwards of its share of `eval_batches` evaluation batches (dp rank d
// evaluates batches d, d + dp, ...). Engine::ledger_input() is this with the engine's eval set.
LedgerModelInput ledger_model_input(const RunPlan& plan, const comm::Coords& coords, int64_t eval_batches);
// The same for world rank `rank`, a parameter server's included (its pieces, parameter_server.h).
LedgerModelInput rank_ledger_input(const RunPlan& plan, const comm::ProcessGrid& grid, int rank, int64_t eval_batches);

// The per-rank comparison document: for total, each category and each name: measured live/peak,
// predicted live/peak, equal (bool); and `equal` overall.
nlohmann::json compare_ledger(const MemoryLedger& measured, const LedgerPrediction& predicted);

}  // namespace sp::plan
