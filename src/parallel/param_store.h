// ParamStore: where this rank's parameters live, and the ParamSource the model reads them from.
//   zero 0:   every unit's full (tensor-parallel) flat buffer, replicated over dp;
//   zero 1/2: the same full buffers; the optimizer updates only the owned dp-shard, then the shards
//             are all-gathered back into the full buffers (Rajbhandari et al. SC'20 §5.1);
//   zero 3:   only the owned dp-shard of each unit persists; acquire() all-gathers the unit into a
//             temporary buffer ("param.gather.<unit>", category param) and release() frees it, once
//             before a unit's forward and again before its backward (§5.3).
// acquire/release nest (a tied embedding is acquired twice by one micro-batch).
// Mixed precision (working dtype bf16/fp16, docs/memory.md §"What phase 2 changes"): the buffers above hold
// 16-bit working weights (acquire() hands the stage 16-bit views, ZeRO's gathers move 16 bits), and
// the fp32 master weights of the owned pieces live next to them as optimizer state ("optim.master.<unit>",
// category optim: ZeRO's K = 12 counts them with AdamW's moments); owned() names the masters, and
// publish() rounds them into the working copy (nearest even) and gathers it. Invariant: after
// initialize() and every publish(), working = round(master) on every element of every replica.
#pragma once

#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "comm/trace_context.h"
#include "core/hash.h"
#include "model/stage_hooks.h"
#include "model/weights.h"
#include "parallel/data_parallel.h"

namespace sp::parallel {

using OwnedPiece = model::UnitPiece;

class ParamStore final : public model::ParamSource {
 public:
  // working: kF32 (the fp32 engine: the buffers are the parameters) or kBF16 / kF16 (mixed precision).
  ParamStore(std::vector<const model::UnitLayout*> units, int zero, GradientSync& dp, MemoryLedger& ledger,
             DType working = DType::kF32);

  // Shard-invariant initialization of everything this rank holds.
  void initialize(uint64_t seed, float init_std);

  // The unit's flat working weights, as a view of the working dtype.
  ConstBufView acquire(int unit) override;
  void release(int unit) override;
  bool mixed() const { return working_ != DType::kF32; }

  // The pieces the optimizer updates (the owned dp-shard, or the whole unit at zero 0): fp32, the
  // parameters themselves, or in mixed precision their master weights.
  std::vector<OwnedPiece> owned();
  // Pieces this rank contributes to logical-tensor evidence: each element of the dp group's copy
  // exactly once: its shard's range of every unit (zero 0: the same range of its full replica).
  std::vector<OwnedPiece> evidence_pieces();
  // After the owned pieces changed (an update, a checkpoint load): in mixed precision round the masters
  // into the working copy; then zero 1/2 all-gather the updated shards into the full buffers.
  void publish();
  // XXH3-128 over this rank's full parameter buffers (zero < 3) or shards (zero 3), the working
  // copies in mixed precision: replica check.
  Digest128 replica_digest() const;
  int zero() const { return zero_; }
  // Intervention point for the fault injector (parallel/fault_injector.h): zero 3's acquire() sends
  // gather_source(unit, shard) instead of the owned shard into the all-gather (the working dtype's
  // patterns, working_shard's bytes). Unset: the shard.
  using GatherSource = std::function<const void*(int unit, const void* shard)>;
  void set_gather_source(GatherSource source) { gather_source_ = std::move(source); }
  // zero 3: the owned shard the all-gather sends, as bytes of the working dtype.
  std::pair<const void*, size_t> working_shard(int unit);

 private:
  struct Unit {
    const model::UnitLayout* layout;
    ShardRange range;  // owned dp-shard
    Tensor full;       // zero < 3                 (numel)          working dtype
    Tensor shard;      // zero 3                   (range.size())   working dtype
    Tensor gathered;   // zero 3, while acquired   (numel)          working dtype
    Tensor master;     // mixed precision: the owned piece (numel at zero 0, range.size() else), fp32
    int refs = 0;
  };
  Unit& unit(int id);
  std::vector<Unit> units_;
  int zero_;
  GradientSync& dp_;
  MemoryLedger& ledger_;
  DType working_;
  Tensor send_shard_;  // zero 1/2: staging for the all-gather's send side (category comm)
  GatherSource gather_source_;
};

}  // namespace sp::parallel
