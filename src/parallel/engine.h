// Engine: one rank's share of a run, composed from the plan (docs/architecture.md §"A run").
// It builds this rank's pipeline chunks (model stages), parameter and gradient stores (ZeRO over
// dp), the tensor-parallel ops, the optimizer and the pipeline runner, and runs steps:
//   1. every dp rank runs its k = M/dp micro-batches through the pipeline schedule; each unit's
//      leaves are summed over the canonical tree and synchronized over dp after the last one;
//   2. the loss is the sum of the M micro-batch loss sums (in micro-batch order) / global tokens;
//   3. the global gradient norm comes from exact sums (order-free, so topology-free), then
//      clipping and the AdamW update of the owned pieces, and the ZeRO-1/2 parameter all-gather;
//   4. evidence: checksums of gradients and parameters, the dp-replica digest check.
// How gradients become parameters (steps 1's sync and 3's update) is the composed UpdateStrategy
// (update_strategy.h): all-reduce peers, or parameter-server workers and servers (parameter_server.h);
// a server rank holds no model stage, runs no micro-batch and joins the same world collectives.
// At dp = tp = pp = 1 every strategy is a no-op on this same code path: that is the reference.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/process_grid.h"
#include "comm/trace_context.h"
#include "core/time_split.h"
#include "data/loader.h"
#include "evidence/activations.h"
#include "evidence/checksums.h"
#include "model/llama_stage.h"
#include "optim/adamw.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "parallel/data_parallel.h"
#include "parallel/fault_injector.h"
#include "parallel/grad_store.h"
#include "parallel/param_store.h"
#include "parallel/pipeline.h"
#include "parallel/ssp_replay.h"
#include "parallel/tensor_parallel.h"
#include "parallel/update_strategy.h"
#include "plan/ledger_model.h"
#include "plan/run_plan.h"

namespace sp::parallel {

struct StepResult {
  int64_t step = 0;
  double loss = 0.0;
  double grad_norm = 0.0;
  double lr = 0.0;
  float clip = 1.0f;
  bool finite = true;
  bool skipped = false;  // no update applied (non-finite gradients)
  // fp16: the loss scale this step ran with (0: no loss scaling) and the scaler's verdict; an overflow is
  // skipped and handled (finite = false, skipped = true), an error only at the minimum scale.
  double loss_scale = 0.0;
  Status status;
  double seconds = 0.0;
  double compute_seconds = 0.0;  // forward + backward intervals on this rank
  // Where this rank's step went (core/time_split.h): nanoseconds by kind, whose sum is at most step_ns (the
  // same wall time as `seconds`); the remainder is "other" (docs/formats/timeline.md).
  int64_t step_ns = 0;
  TimeSplit time_split;
  std::vector<evidence::TensorSummary> grads;  // when checksums were taken (all tensors, canonical order)
  std::vector<evidence::TensorSummary> params;
  // Replica check: per world rank, its dp group's verdict.
  std::vector<int> diverging_ranks;  // world ranks whose parameters differ from their dp group's rank 0
  // SSP (parameter server with staleness > 0, or its single-process replay): the version each worker
  // computed this step on, by worker (comm/staleness.h); empty otherwise.
  std::vector<int64_t> versions;
};

class Engine {
 public:
  Engine(const plan::RunPlan& plan, const comm::ProcessGrid& grid, comm::GridCommunicators& comms,
         comm::TraceContext& trace, MemoryLedger& ledger, const data::TokenDataset* train,
         const data::TokenDataset* eval, Timeline* timeline);
  ~Engine();

  // Where training batches come from: by default the topology-free loader over the train split.
  // `source(step, micro_batch, tokens)` must fill (B, T+1) tokens as a pure function of its arguments.
  using BatchSource = std::function<void(int64_t step, int64_t micro_batch, int32_t* tokens)>;
  void set_batch_source(BatchSource source) { batches_ = std::move(source); }

  // Arms one fault of the catalogue (evidence/faults.h) on this rank's injector (fault_injector.h).
  void set_fault(const evidence::FaultSpec& fault);
  const FaultInjector& faults() const { return faults_; }

  // The per-layer activation trace of training forward passes (not eval, not recompute replays);
  // null (the default) records nothing. The recorder outlives the engine.
  void set_activation_recorder(evidence::ActivationRecorder* recorder) { activations_ = recorder; }

  // Shard-invariant initialization from the run seed.
  void initialize();
  // One optimizer step. `checksums`: take gradient and parameter summaries this step.
  StepResult step(int64_t step, bool checksums);
  // Mean loss over the eval set (every rank returns the same value).
  double evaluate(int64_t step);

  // The training state this rank owns, for checkpoints: each owned piece of a unit (the dp-shard, or
  // the whole local unit at ZeRO 0) with its parameters and both AdamW moments over the same range.
  // At ZeRO 0 every dp rank holds a full replica; `saver` is true only on dp rank 0.
  // A parameter server saves its pieces; a parameter-server worker saves nothing.
  using StatePiece = parallel::StatePiece;
  std::vector<StatePiece> state_pieces() { return update_->state(); }
  bool saves_state() const { return update_->saves_state(); }
  // After parameters were written through state_pieces(): make replicas consistent again (the
  // ZeRO-1/2 all-gather of the owned shards into the full buffers).
  void state_loaded();
  // The data-loader position to resume at `next_step` (JSON, data/loader.h).
  nlohmann::json loader_cursor(int64_t next_step) const;
  Result<int64_t> restore_loader(const nlohmann::json& cursor) const;

  // Overwrites every parameter this rank holds from full logical tensors (HF names, (out, in) layout).
  void set_parameters(const std::function<const float*(const std::string& name)>& logical);
  // Loss and gradients of the plan's M micro-batches of explicit tokens (M·B, T+1), in micro-batch order, no
  // update: `shardproof grads` (M = 1) and `judge` (a recorded global batch). Requires dp = 1 (any tp, pp).
  // Returns the mean loss over the target tokens; each micro-batch's loss sum into micro_batch_losses if
  // given; gradients via gradient_pieces(), × loss_scale (fp16's loss scale: a power of two keeps them exact).
  double compute_gradients(const int32_t* tokens, std::vector<double>* micro_batch_losses = nullptr,
                           double loss_scale = 1.0);
  std::vector<model::UnitPiece> gradient_pieces() { return update_->gradient_pieces(); }
  std::vector<model::UnitPiece> parameter_pieces() { return update_->parameter_pieces(); }
  std::vector<model::UnitPiece> owned_parameter_pieces() { return update_->owned_parameters(); }
  const evidence::LogicalTensors& tensors() const { return tensors_; }
  const comm::ProcessGrid& grid() const { return grid_; }
  comm::Coords coords() const { return coords_; }  // a server's: all zero
  bool server() const { return server_; }
  // "dp1.tp0.pp0", or "server0" (comm/roles.h).
  std::string label(int world_rank) const { return roles_.label(world_rank, grid_); }
  const plan::RunPlan& plan() const { return plan_; }
  optim::AdamW& optimizer() { return update_->optimizer(); }
  optim::LossScaler* loss_scaler() { return scaler_ ? &*scaler_ : nullptr; }  // fp16 only
  PipelineRunner& runner() { return *runner_; }
  // Summaries of the pieces given (a world collective): used for checksums and by tests.
  std::vector<evidence::TensorSummary> summarize(const std::vector<model::UnitPiece>& pieces, bool digest);
  std::vector<const model::UnitLayout*> units() const;
  // What the ledger model needs to predict this rank's memory (plan/ledger_model.h).
  plan::LedgerModelInput ledger_input() const;
  // The ledger model's prediction for this rank, with the SSP replay's caches (ssp_replay.h).
  plan::LedgerPrediction predicted_ledger() const;

 private:
  double global_target_tokens(int64_t step) const;
  std::vector<int64_t> eval_batches_of_this_rank() const;
  std::vector<plan::PipeAction> eval_actions(int64_t batches) const;
  std::vector<int> replica_check();
  std::vector<int> stale_replica_check(int64_t step, std::vector<int64_t>& versions);
  void run_micro_batches(PipelineRunner::StepIO& io);

  plan::RunPlan plan_;
  comm::ProcessGrid grid_;
  comm::Coords coords_;
  comm::GridCommunicators& comms_;
  comm::TraceContext& trace_;
  MemoryLedger& ledger_;
  const data::TokenDataset* train_;
  const data::TokenDataset* eval_;
  Timeline* timeline_;
  comm::RoleMap roles_;
  bool server_ = false;
  std::vector<model::UnitLayout> server_units_;  // a server's: every unit (tp = 1)
  evidence::LogicalTensors tensors_;
  std::unique_ptr<kernels::Gemm16> gemm16_;                 // mixed precision: the stages' 16-bit GEMM backend
  std::vector<std::unique_ptr<model::LlamaStage>> stages_;  // by virtual stage
  std::vector<plan::ChunkPlacement> placements_;
  std::unique_ptr<GradientSync> dp_sync_;
  std::unique_ptr<TensorParallel> tp_ops_;
  std::unique_ptr<ParamStore> params_;
  std::unique_ptr<GradStore> grads_;
  std::unique_ptr<UpdateStrategy> update_;
  std::unique_ptr<PipelineRunner> runner_;
  std::unique_ptr<SspReplay> replay_;             // parallel.replay_workers > 0
  std::vector<plan::PipeAction> replay_actions_;  // one replayed worker's k micro-batches
  std::optional<data::Loader> loader_;
  BatchSource batches_;
  FaultInjector faults_;
  std::optional<data::EvalSet> eval_set_;
  optim::LrSchedule schedule_;
  std::vector<plan::PipeAction> actions_;
  evidence::ActivationRecorder* activations_ = nullptr;
  std::optional<optim::LossScaler> scaler_;  // fp16 (config::RunConfig::fp16)
};

}  // namespace sp::parallel
