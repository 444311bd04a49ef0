// FaultInjector: the engine's one point of contact with the fault catalogue (evidence/faults.h).
// Engine::step and the trainer call it at named hook points of a step; each hook acts only when the
// armed fault fires there (step, rank), and with no fault armed every hook is a no-op that passes its
// input through. Faults that must act inside a store (a skipped dp sync, an unzeroed leaf, a stale
// ZeRO-3 shard, a dropped TP reduction, a dropped push, a pull not taken, a repeated server update) are
// wired at arm() through the stores' and the parameter server's generic intervention points (PsHooks),
// never through fault-specific code in them.
// Not the catalogue (what each fault breaks and which view must catch it: evidence/faults.h).
// Invariant: a fault acts at exactly one step, and identically on every rank it names.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "comm/process_grid.h"
#include "comm/trace_context.h"
#include "data/loader.h"
#include "evidence/faults.h"
#include "model/weights.h"
#include "parallel/grad_store.h"
#include "parallel/param_store.h"
#include "parallel/tensor_parallel.h"
#include "parallel/update_strategy.h"

namespace sp::parallel {

class FaultInjector {
 public:
  // Fills (B, T+1) tokens of global micro-batch `mb` of step `step`.
  using BatchSource = std::function<void(int64_t step, int64_t mb, int32_t* tokens)>;

  // What a fault may act on: this rank's stores and groups, and the data it trains on.
  struct Targets {
    GradStore* grads = nullptr;
    ParamStore* params = nullptr;
    TensorParallel* tp = nullptr;
    comm::Communicator* world = nullptr;
    comm::TraceContext* trace = nullptr;
    std::vector<const model::UnitLayout*> units;  // this rank's, in stage order
    comm::Coords coords;
    int pp_size = 1;
    const data::TokenDataset* train = nullptr;  // data-order draws from it with another seed
    data::LoaderSpec loader;
    int64_t micro_batch_tokens = 0;    // B·T: wrong-loss-scale's wrong denominator
    UpdateStrategy* update = nullptr;  // the parameter-server faults act on a worker's or server's update
    int workers = 0;                   // parameter server: W (server j is world rank W + j)
    bool mixed_precision = false;      // train.precision bf16/fp16: tp-grad-scale's factor (kTpGradFactor16)
  };
  // tp-grad-scale's wrong factor: 1 + 2^-7 in fp32; in mixed precision 1 + 2^-2, because a factor must
  // move the gradient beyond the 16-bit envelope τ₁₆ that the anchored comparison allows (3.38e-2 on the
  // 4-layer tiny model in bf16; docs/faults.md, docs/equivalence.md §6) to be a bug rounding cannot hide.
  static constexpr float kTpGradFactor = 1.0f + 0x1p-7f;
  static constexpr float kTpGradFactor16 = 1.0f + 0x1p-2f;

  // Arms `fault` (kNone: nothing) on this rank's targets.
  void arm(const evidence::FaultSpec& fault, Targets targets);
  const evidence::FaultSpec& fault() const { return fault_; }

  // -- hook points, in the order a step reaches them --
  void before_step(int64_t step);
  // The tokens of the rank's micro-batch `mb` (global index; `first` is the rank's first): loaded by
  // `load`, unless the fault substitutes another micro-batch or another data order.
  void tokens(int64_t mb, int64_t first, int32_t* buf, const BatchSource& load) const;
  // How many times the W pass of the rank's micro-batch `mb` (global; `first` is the rank's first) runs under
  // ZB-H1: 1, or for zb-drop-w 0 and for zb-repeat-w 2 on the rank's first micro-batch.
  int weight_passes(int64_t mb, int64_t first) const;
  // The factor every micro-batch's loss sum is scaled by (1 / global target tokens).
  float loss_scale(float scale) const;
  // Every micro-batch's forward and backward ran; the loss sum (an evidence collective) comes next.
  void after_backward();
  // The gradients are final; the optimizer update comes next.
  void before_update();
  // The trainer committed the checkpoint saved after this step into `step_dir`.
  Status after_checkpoint(const std::string& step_dir) const;

 private:
  bool fires(evidence::FaultKind kind, int64_t step) const;
  // arm()'s two groups of faults that act through intervention points: the gradient store's hooks
  // (skip-grad-allreduce, stale-grad, nan-injection, tp-grad-scale) and the parameter server's (PsHooks).
  GradStore::Hooks gradient_hooks();
  void arm_parameter_server();
  int first_block() const;  // unit id of the first block this rank holds, −1 if none

  evidence::FaultSpec fault_;
  Targets t_;
  int64_t step_ = -1;
  int64_t tp_reduce_calls_ = 0;             // reduce_from_tp calls since before_step
  std::optional<data::Loader> other_seed_;  // data-order
  std::vector<char> stale_shard_;           // zero3-stale-param: the pre-update shard's bytes, outside the ledger
  int stale_unit_ = -1;
};

}  // namespace sp::parallel
