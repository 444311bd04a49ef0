// GradStore: the GradSink of a rank — canonical accumulation over its micro-batches, then dp sync.
// Per unit, each micro-batch's gradient is a fresh zeroed leaf; done() pushes it into a
// CanonicalAccumulator (kernels/reduce.h), which merges partial sums over the canonical tree. After
// the rank's last local micro-batch the unit's total is synchronized at once (bucket = unit):
//   zero 0:   all-reduce in place; the total stays in the accumulation buffer;
//   zero 1:   reduce-scatter into the owned shard ("grad.<unit>.shard"); buffers kept for next step;
//   zero 2/3: reduce-scatter into the shard, then every full-size buffer of the unit is freed, so
//             between steps only 1/dp of the gradients is resident (Rajbhandari et al. SC'20 §5.2).
// Buffers are "grad.<unit>.b<i>"; how many a unit needs is canonical_accumulator_peak_buffers(k) under
// parallel.reduction = "deterministic" (log2(k) + 1 for k = 2^a). Under "fast" (fp32 gradients only: the
// plan refuses 16-bit ones there) a unit has ONE accumulation buffer, b0: the first leaf of the step is
// zeroed and every later micro-batch's backward adds into the same buffer (+=, in micro-batch order), as
// Megatron-LM's main_grad and DeepSpeed's accumulation buffers do. Its sum is sequential, not the
// canonical tree, so fast mode is compared with tolerances (docs/equivalence.md), as its MPI sum already was.
// 16-bit gradients (train.grad_dtype bf16/fp16, docs/memory.md §"What phase 2 changes"): the model still
// writes an fp32 leaf ("grad.<unit>.leaf", allocated by leaf(), freed by done()); done() rounds it once
// into a 16-bit buffer b<i>, which the canonical tree sums with a rounding per node; the dp sync and
// the shards are 16-bit, and so are the evidence pieces: the norm and the checksums widen them exactly,
// block by block, as they read them (no fp32 copy of the synchronized gradients).
// Overlap (parallel.overlap_buckets = n ≥ 1, dp > 1): a unit's sync is started, not completed, at its last
// done(); up to n syncs are in flight while the backward goes on, progressed (test) at every later leaf()
// and done(), since MPI progresses only inside MPI calls. Posting follows points equal on every dp rank:
// starting a sync first advances the earlier ones (the deterministic all-reduce's all_gather is posted, so
// at most one all_to_all is in flight), then completes the oldest if n are in flight (slot reuse; ZeRO-2/3
// free its full-size buffers only then), then posts. finish_sync() completes the rest in unit order; it runs
// after the backward, before complete(), owned_grads() and the optimizer. The bits are those of the
// blocking sync; only the timing, and at ZeRO-2/3 when the full buffers are freed, move (the ledger model
// replays the same order: plan/ledger_replay.h).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "comm/trace_context.h"
#include "kernels/reduce.h"
#include "model/stage_hooks.h"
#include "model/weights.h"
#include "parallel/data_parallel.h"
#include "parallel/param_store.h"

namespace sp::parallel {

class GradStore final : public model::GradSink {
 public:
  // k: micro-batches this rank runs per step (its leaves per unit).
  // dtype: the gradient dtype (kF32, or the 16-bit compute dtype).
  // reduction: kDeterministic sums the leaves over the canonical tree; kFast into one buffer (kF32 only).
  // overlap: syncs in flight at once (parallel.overlap_buckets; 0 = blocking; ignored at dp = 1, where the
  // sync is a no-op); the GradientSync needs that many staging slots.
  GradStore(std::vector<const model::UnitLayout*> units, int64_t k, int zero, GradientSync& dp, MemoryLedger& ledger,
            comm::TraceContext& trace, DType dtype = DType::kF32,
            config::Reduction reduction = config::Reduction::kDeterministic, int overlap = 0);

  BufView leaf(int unit) override;
  void done(int unit) override;
  // True for a leaf just opened and zero: every 16-bit leaf; an fp32 tree buffer (new, or reused and zeroed);
  // not fast mode's running sum after the step's first micro-batch, nor a leaf handed out a second time.
  bool leaf_is_zero(int unit) const override;

  void begin_step(int64_t step);
  // Completes every sync still in flight, in unit order (a no-op without overlap); before the gradients are read.
  void finish_sync();
  // True once every unit has been synchronized this step and no sync is in flight.
  bool complete() const;
  // Where each unit's sync of the last step started and completed (steady-clock ns; completed = when this rank
  // saw it complete), in start order: the timeline's "grad_sync" intervals.
  struct SyncSpan {
    int unit = 0;
    int64_t start_ns = 0, end_ns = 0;
  };
  const std::vector<SyncSpan>& sync_spans() const { return spans_; }
  int overlap() const { return overlap_; }
  // Syncs started and not yet completed by finish_sync() or a later start (test() may have seen them done).
  int in_flight() const { return static_cast<int>(in_flight_.size()); }
  // The synchronized gradient of the pieces ParamStore::owned() names, in the same order, as views of
  // dtype() (the whole unit at zero 0, the owned shard otherwise).
  std::vector<ConstBufView> owned_grads() const;
  // zero 0: the same buffers as writable scratch, for a caller that has consumed the totals (a
  // parameter-server worker after its push); valid until the next begin_step.
  std::vector<BufView> spent_totals();
  DType dtype() const { return dtype_; }
  // Pieces for logical-tensor evidence: this dp rank's range of every unit, whatever the stage: the
  // synchronized gradients themselves, in dtype() (once complete()).
  std::vector<OwnedPiece> evidence_pieces();

  // Intervention points for the fault injector (parallel/fault_injector.h); each unset one is a no-op.
  //   zero_reused(unit):   before a reused leaf buffer is zeroed; false keeps its old values (16-bit
  //                        gradients: before a reused 16-bit buffer receives the rounded leaf; false
  //                        adds its old values to the leaf first, as an unzeroed fp32 leaf would);
  //   leaf_done(unit, leaf): a micro-batch's fp32 leaf is handed back, before it is accumulated;
  //   sync(unit, total):   just before the unit's dp sync, with its total in the gradient dtype; false
  //                        skips the sync on this rank.
  struct Hooks {
    std::function<bool(int unit)> zero_reused;
    std::function<void(int unit, BufView leaf)> leaf_done;
    std::function<bool(int unit, BufView total)> sync;
  };
  void set_hooks(Hooks hooks) { hooks_ = std::move(hooks); }

 private:
  struct Unit {
    Unit(const model::UnitLayout* l, ShardRange r, DType t) : layout(l), range(r), acc(l->numel, t) {}
    const model::UnitLayout* layout;
    ShardRange range;
    kernels::CanonicalAccumulator acc;
    std::vector<Tensor> buffers;  // every full-size buffer allocated for this unit (gradient dtype)
    std::vector<BufView> free;    // buffers not on the accumulator stack
    BufView current;              // fp32 leaf of the micro-batch in progress (data null: none)
    bool current_zero = false;    // `current` held only zeros when leaf() handed it out (leaf_is_zero)
    BufView total;                // the sum over the rank's leaves, after the last one (zero 0: synchronized)
    int64_t leaves = 0;
    Tensor shard;  // zero ≥ 1, (range.size()) of the gradient dtype
    bool synced = false;
    Tensor leaf32;  // 16-bit gradients: the fp32 leaf in flight ("grad.<unit>.leaf")
  };
  Unit& unit(int id);
  // A full-size buffer of the gradient dtype: a free one (reused = true) or a new, zeroed one.
  std::pair<BufView, bool> take_buffer(Unit& u);
  // 16-bit gradients: the fp32 leaf rounded once into a buffer of the gradient dtype; frees the leaf.
  BufView round_leaf(Unit& u);
  void sync(Unit& u);
  // Overlap: a sync in flight, its staging slot and the index of its span.
  struct InFlight {
    Unit* unit;
    PendingSync sync;
    int slot;
    size_t span;
  };
  void start_sync(Unit& u, bool run);
  void progress();             // test() every sync in flight (records when each completes)
  void retire();               // completes the oldest sync in flight
  void release_full(Unit& u);  // the unit's sync is complete: ZeRO-2/3 free its full-size buffers
  bool mixed() const { return dtype_ != DType::kF32; }
  // The leaf of a micro-batch as the accumulation buffer (fp32): the canonical tree's next buffer, or in
  // fast mode the unit's one buffer, zeroed only for the step's first micro-batch.
  BufView accumulation_leaf(Unit& u);

  std::vector<Unit> units_;
  int64_t k_;
  int zero_;
  GradientSync& dp_;
  MemoryLedger& ledger_;
  comm::TraceContext& trace_;
  int64_t step_ = -1;
  Hooks hooks_;
  DType dtype_;
  bool one_buffer_;  // reduction fast: one accumulation buffer per unit
  int overlap_;      // syncs in flight at most (0: blocking)
  std::deque<InFlight> in_flight_;
  int64_t started_ = 0;  // syncs started this step (slot = started % overlap)
  std::vector<SyncSpan> spans_;
};

}  // namespace sp::parallel
