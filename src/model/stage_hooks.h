// What a model stage asks of the parallel layer, and nothing more. The model never learns which
// strategy is on: it sees its shard shapes (UnitLayout), the three hooks below (ParamSource, GradSink,
// TensorParallelOps) and an optional ActivationObserver. Buffers cross these hooks as typed views
// (tensor/buf_view.h): pointer, count and dtype, so one hook serves fp32 and mixed precision alike.
// At degree 1 every one of them is trivial (parallel/ provides those implementations too).
#pragma once

#include <cstdint>

#include "tensor/buf_view.h"

namespace sp::model {

// Parameters of a unit, as a flat buffer in UnitLayout order. Under ZeRO-3 acquire() gathers the
// shards into a full buffer and release() frees it; otherwise both are bookkeeping only.
// The view's dtype is the source's working dtype: fp32, or in mixed precision (model/precision.h) the
// 16-bit working weights (bf16/fp16 patterns, same layout). The stage checks it against its precision.
class ParamSource {
 public:
  virtual ~ParamSource() = default;
  virtual ConstBufView acquire(int unit) = 0;
  virtual void release(int unit) = 0;
};

// Gradients of a unit for the current micro-batch (a "leaf" of the canonical accumulation tree).
// leaf() returns a zeroed buffer the first time it is asked for in a micro-batch and the same buffer
// until done(); backward kernels add (+=) parameter gradients into it. done() hands the leaf to the
// accumulator (and, after the last local micro-batch, to gradient synchronization). A leaf is fp32 in
// every precision; with a 16-bit grad dtype the sink rounds it once in done() (model/precision.h).
class GradSink {
 public:
  virtual ~GradSink() = default;
  virtual BufView leaf(int unit) = 0;  // the unit's numel elements, F32
  virtual void done(int unit) = 0;
  // True when the unit's open leaf holds only zeros (asked right after leaf(), before any write): a product
  // that is the only writer of its range may then overwrite it (β = 0) for the same sum without reading it.
  // False (the default, and whenever a leaf accumulates onto earlier values) keeps +=.
  virtual bool leaf_is_zero(int unit) const {
    (void)unit;
    return false;
  }
};

// The conjugate pair of Megatron-style tensor parallelism (Shoeybi et al. 2019, §3):
//   reduce_from_tp: forward all-reduce (sum of the partial products of a row-parallel layer),
//                   backward identity;
//   copy_to_tp:     forward identity (the replicated input of a column-parallel layer),
//                   backward all-reduce of the input gradient.
// The stage calls reduce_from_tp() in forward and copy_to_tp_backward() in backward; both are no-ops
// at tp = 1. The vocabulary-parallel cross-entropy needs a max and a sum over the tp group.
// Each reduces its view in place over the tp group (the stage hands fp32 activations in every precision).
// Sequence parallelism (Korthikanti et al. 2022, §4.2.2) replaces each all-reduce by its two halves,
// with the regions between the TP-split GEMMs (norms, residual adds, the head's input) holding the
// rank's sequence shard: positions [rank·T/tp, (rank+1)·T/tp) of each of the B sequences, a contiguous
// (B, T/tp, ·) buffer of N/tp rows, while `full` is the (B, T, ·) buffer of all N = B·T rows:
//   reduce_scatter_to_sp:  forward reduce-scatter of a row-parallel layer's (N, ·) partial products
//                          into this rank's (N/tp, ·) shard; backward all-gather;
//   gather_from_sp:        forward all-gather of the (N/tp, ·) shards into the replicated (N, ·) input
//                          of a column-parallel layer; backward reduce-scatter (gather_from_sp_backward);
//   reduce_replicated_grad: the sum over the group of a replicated weight's (the norms') gradient,
//                          computed by each rank on its own token shard.
// `shard` may overlap `full`; full.count = size() · shard.count, one dtype.
class TensorParallelOps {
 public:
  virtual ~TensorParallelOps() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void reduce_from_tp(BufView x) = 0;
  virtual void copy_to_tp_backward(BufView dx) = 0;
  virtual void all_reduce_max(BufView x) = 0;
  virtual void all_reduce_sum(BufView x) = 0;
  virtual void reduce_scatter_to_sp(ConstBufView full, BufView shard) = 0;
  virtual void gather_from_sp(ConstBufView shard, BufView full) = 0;
  virtual void gather_from_sp_backward(ConstBufView dfull, BufView dshard) = 0;
  virtual void reduce_scatter_to_sp_backward(ConstBufView dshard, BufView dfull) = 0;
  virtual void reduce_replicated_grad(BufView dw) = 0;
};

// Optional per-layer activation trace (evidence/activations.h): LlamaStage::forward calls observe()
// at fixed points of a micro-batch's forward pass, in forward order. The model does no I/O; the
// observer decides what to keep. Backward (including a recompute replay) never calls it.
class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // point: "embed", "block.<global layer>", "final_norm", "logits"; micro_batch: the slot's global
  // micro-batch index; data: this rank's activation as stored, (N, C), or (N, Vl) for "logits" (the
  // local vocabulary shard under tp > 1); fp32, or 16-bit for final_norm and logits in mixed precision
  // (the observer widens them exactly). Under sequence parallelism the residual stream is a token
  // shard, so only "final_norm" (gathered) and "logits" are observed.
  virtual void observe(const char* point, int64_t micro_batch, ConstBufView data) = 0;
};

}  // namespace sp::model
