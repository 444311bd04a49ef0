// PipelineRunner: executes a schedule's actions (schedule.h) on this rank's chunks, with the typed
// point-to-point transfers of pipeline parallelism over the traced pp communicator:
//   send_forward / recv_forward:   (N, C) activations from chunk c to chunk c + 1
//   send_backward / recv_backward: (N, C) gradients from chunk c + 1 to chunk c
// Sends are non-blocking (isend) and receives blocking, which with any of the three schedules is
// deadlock-free: every receive's matching send is posted without waiting on the receiver. A send's
// buffer (a slot's output, or the stage's gradient scratch) is not reused before its request is
// complete. At pp = 1 there is one chunk that is first and last: no transfer ever happens.
// The runner records a timeline of compute / send / recv intervals per micro-batch (timeline.h); under
// ZB-H1 the compute of a backward is two intervals, "backward_input" (B) and "backward_weight" (W), on the
// pipeline ranks ≥ 1 (plan::splits_backward; rank 0's schedule has full backwards, as 1F1B's).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/trace_context.h"
#include "model/llama_stage.h"
#include "parallel/timeline.h"
#include "plan/run_plan.h"
#include "plan/schedule.h"

namespace sp::parallel {

class PipelineRunner {
 public:
  struct Chunk {
    model::LlamaStage* stage;
    plan::ChunkPlacement placement;
  };
  PipelineRunner(std::vector<Chunk> chunks, comm::Communicator& pp, MemoryLedger& ledger, comm::TraceContext& trace,
                 Timeline* timeline);
  ~PipelineRunner();

  struct StepIO {
    int64_t step = 0;
    int64_t first_micro_batch = 0;                                   // global index of local micro-batch 0
    int64_t micro_batches = 1;                                       // local m
    std::function<void(int64_t global_mb, int32_t* tokens)> tokens;  // fill (B, T+1)
    std::function<void(int64_t global_mb, double loss_sum)> loss;    // last chunk only
    model::ParamSource* params = nullptr;
    model::GradSink* grads = nullptr;  // null for forward-only (eval)
    model::TensorParallelOps* tp = nullptr;
    model::ActivationObserver* observer = nullptr;
    float loss_scale = 1.0f;
    // ZB-H1: how many times global micro-batch mb's W pass runs (unset: once); 0 and 2 are the fault
    // injector's zb-drop-w and zb-repeat-w (the leaves still reach done() once, zeroed or with W added twice).
    std::function<int(int64_t global_mb)> weight_passes;
    comm::Phase forward_phase = comm::Phase::kForward;
  };
  // Runs `actions` (all forwards only when io.grads is null).
  void run(const std::vector<plan::PipeAction>& actions, const StepIO& io);
  // Slots allocated so far per virtual stage (the ledger model predicts this).
  std::vector<int64_t> slots_allocated() const;

 private:
  struct ChunkState {
    Chunk chunk;
    std::vector<std::unique_ptr<model::ActivationSlot>> slots;
    std::vector<model::ActivationSlot*> free;
    std::map<int64_t, model::ActivationSlot*> busy;                                // by local micro-batch
    std::map<model::ActivationSlot*, std::unique_ptr<comm::Request>> pending_out;  // forward isends
    std::unique_ptr<comm::Request> pending_grad;                                   // backward isend of grad_input()
  };
  void forward(ChunkState& c, int64_t mb, const StepIO& io);
  // A full backward, or (input_only) the B pass of a split one, which keeps the slot busy until weight().
  void backward(ChunkState& c, int64_t mb, bool input_only, const StepIO& io);
  // The W pass of a split backward (ZB-H1): weight gradients only, no transfer; frees the slot.
  void weight(ChunkState& c, int64_t mb, const StepIO& io);
  int tag(int chunk, int direction, int64_t mb, int64_t m) const;

  std::vector<ChunkState> chunks_;
  comm::Communicator& pp_;
  MemoryLedger& ledger_;
  comm::TraceContext& trace_;
  Timeline* timeline_;
  Tensor tokens_;  // (B, T+1) int32, category io
  int next_slot_index_ = 0;
};

}  // namespace sp::parallel
