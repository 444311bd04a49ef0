// TensorParallel: the conjugate communication pair of Megatron-style tensor parallelism over the
// tp axis (model/stage_hooks.h states the math). Deterministic mode uses the canonical reduction,
// so every tp rank holds bit-identical replicated activations; fast mode uses MPI's all-reduce.
// At tp = 1 every call returns immediately (no communication, no trace record).
// Sequence parallelism (parallel.sequence_parallel, tp > 1): the reduce-scatter is the first half of the
// deterministic all-reduce (all_to_all + canonical tree sum of the owned chunk) and the all-gather its
// second half, so every element is summed in the same canonical order as without it (bit for bit the
// same activations); fast mode uses MPI's reduce_scatter and all_gather. A (B, T, ·) buffer is permuted
// to rank-major order (tp, B, T/tp, ·) in the staging before a reduce-scatter, and back after an
// all-gather, so that rank r's chunk is its sequence shard of every sequence.
#pragma once

#include <functional>

#include "comm/communicator.h"
#include "config/run_config.h"
#include "model/stage_hooks.h"
#include "tensor/tensor.h"

namespace sp::parallel {

class TensorParallel final : public model::TensorParallelOps {
 public:
  // max_count: the largest activation reduced (N·C), sizes the deterministic staging (category comm);
  // sp_sequences: B, the sequences of a micro-batch under sequence parallelism (0: off), whose staging
  // (2·N·C in either mode) holds the rank-major copy and the reduce-scatter's scratch.
  TensorParallel(comm::Communicator& tp, config::Reduction mode, MemoryLedger& ledger, int64_t max_count,
                 int64_t sp_sequences = 0);
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
  // Sequence parallelism (model/stage_hooks.h). The forward reduce-scatter asks the forward-reduce hook
  // as reduce_from_tp does (skipped: the shard keeps this rank's partial product).
  void reduce_scatter_to_sp(ConstBufView full, BufView shard) override;
  void gather_from_sp(ConstBufView shard, BufView full) override { gather(shard, full); }
  void gather_from_sp_backward(ConstBufView dfull, BufView dshard) override { scatter(dfull, dshard); }
  void reduce_scatter_to_sp_backward(ConstBufView dshard, BufView dfull) override { gather(dshard, dfull); }
  void reduce_replicated_grad(BufView dw) override {
    if (!replicated_grad_reduce_ || replicated_grad_reduce_()) sum(dw);
  }
  // Intervention point for the fault injector: asked before every reduce_replicated_grad (the norms'
  // gradients under sequence parallelism); false skips it. Unset: every reduction runs.
  void set_replicated_grad_reduce_hook(std::function<bool()> hook) { replicated_grad_reduce_ = std::move(hook); }
  static int64_t staging_floats(config::Reduction mode, int tp, int64_t max_count, bool sequence_parallel = false);
  // Sequence shards (B, T/tp, ·) ↔ rank-major chunks: dst (tp, B, seg) := src (B, tp, seg), or back.
  static void to_rank_major(BufView dst, ConstBufView src, int tp, int64_t sequences);
  static void from_rank_major(BufView dst, ConstBufView src, int tp, int64_t sequences);

 private:
  void sum(BufView x);
  void gather(ConstBufView shard, BufView full);
  void scatter(ConstBufView full, BufView shard);               // reduce-scatter, the sum in the canonical order
  BufView staging(int64_t offset, int64_t count, DType dtype);  // elements of dtype
  comm::Communicator& tp_;
  config::Reduction mode_;
  int64_t sequences_ = 0;
  Tensor staging_;
  std::function<bool()> forward_reduce_;
  std::function<bool()> replicated_grad_reduce_;
};

}  // namespace sp::parallel
