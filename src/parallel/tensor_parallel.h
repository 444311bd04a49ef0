// TensorParallel: the conjugate communication pair of Megatron-style tensor parallelism over the
// tp axis (model/stage_hooks.h states the math). Deterministic mode uses the canonical reduction,
// so every tp rank holds bit-identical replicated activations; fast mode uses MPI's all-reduce.
// At tp = 1 every call returns immediately (no communication, no trace record).
#pragma once

#include <functional>

#include "comm/communicator.h"
#include "config/run_config.h"
#include "model/stage_hooks.h"
#include "tensor/tensor.h"

namespace sp::parallel {

class TensorParallel final : public model::TensorParallelOps {
 public:
  // max_count: the largest activation reduced (N·C), sizes the deterministic staging (category comm).
  TensorParallel(comm::Communicator& tp, config::Reduction mode, MemoryLedger& ledger, int64_t max_count);
  int rank() const override { return tp_.rank(); }
  int size() const override { return tp_.size(); }
  void reduce_from_tp(BufView x) override {
    if (!forward_reduce_ || forward_reduce_()) sum(x);
  }
  // Intervention point for the fault injector (parallel/fault_injector.h): asked before every
  // reduce_from_tp; false skips that reduction. Unset: every reduction runs.
  void set_forward_reduce_hook(std::function<bool()> hook) { forward_reduce_ = std::move(hook); }
  void copy_to_tp_backward(BufView dx) override { sum(dx); }
  void all_reduce_max(BufView x) override;
  void all_reduce_sum(BufView x) override { sum(x); }
  static int64_t staging_floats(config::Reduction mode, int tp, int64_t max_count);

 private:
  void sum(BufView x);
  comm::Communicator& tp_;
  config::Reduction mode_;
  Tensor staging_;
  std::function<bool()> forward_reduce_;
};

}  // namespace sp::parallel
