// What a model stage asks of the parallel layer, and nothing more. The model never learns which
// strategy is on: it sees its shard shapes (UnitLayout) and these three small interfaces.
// At degree 1 every one of them is trivial (parallel/ provides those implementations too).
#pragma once

#include <cstdint>

#include "core/check.h"

namespace sp::model {

// Parameters of a unit, as a flat buffer in UnitLayout order. Under ZeRO-3 acquire() gathers the
// shards into a full buffer and release() frees it; otherwise both are bookkeeping only.
// A stage in mixed precision (model/precision.h) asks for the 16-bit working weights instead:
// acquire16() returns the unit's flat buffer of bf16/fp16 patterns (same layout) and is released by
// release(). A source that holds fp32 weights only is never asked for them.
class ParamSource {
 public:
  virtual ~ParamSource() = default;
  virtual const float* acquire(int unit) = 0;
  virtual const uint16_t* acquire16(int unit) {
    SP_CHECK(false, "unit {}: this ParamSource holds no 16-bit working weights (the stage is mixed precision)", unit);
    __builtin_unreachable();
  }
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
  virtual float* leaf(int unit) = 0;
  virtual void done(int unit) = 0;
};

// The conjugate pair of Megatron-style tensor parallelism (Shoeybi et al. 2019, §3):
//   reduce_from_tp: forward all-reduce (sum of the partial products of a row-parallel layer),
//                   backward identity;
//   copy_to_tp:     forward identity (the replicated input of a column-parallel layer),
//                   backward all-reduce of the input gradient.
// The stage calls reduce_from_tp() in forward and copy_to_tp_backward() in backward; both are no-ops
// at tp = 1. The vocabulary-parallel cross-entropy needs a max and a sum over the tp group.
class TensorParallelOps {
 public:
  virtual ~TensorParallelOps() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void reduce_from_tp(float* x, int64_t n) = 0;
  virtual void copy_to_tp_backward(float* dx, int64_t n) = 0;
  virtual void all_reduce_max(float* x, int64_t n) = 0;
  virtual void all_reduce_sum(float* x, int64_t n) = 0;
};

// Optional per-layer activation trace (evidence/activations.h): LlamaStage::forward calls observe()
// at fixed points of a micro-batch's forward pass, in forward order. The model does no I/O; the
// observer decides what to keep. Backward (including a recompute replay) never calls it.
class ActivationObserver {
 public:
  virtual ~ActivationObserver() = default;
  // point: "embed", "block.<global layer>", "final_norm", "logits"; micro_batch: the slot's global
  // micro-batch index; data: this rank's activation, n floats: (N, C), or (N, Vl) for "logits"
  // (the local vocabulary shard under tp > 1).
  virtual void observe(const char* point, int64_t micro_batch, const float* data, int64_t n) = 0;
};

}  // namespace sp::model
