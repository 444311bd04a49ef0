// ParamStore: where this rank's parameters live, and the ParamSource the model reads them from.
//   zero 0:   every unit's full (tensor-parallel) flat buffer, replicated over dp;
//   zero 1/2: the same full buffers; the optimizer updates only the owned dp-shard, then the shards
//             are all-gathered back into the full buffers (Rajbhandari et al. SC'20 §5.1);
//   zero 3:   only the owned dp-shard of each unit persists; acquire() all-gathers the unit into a
//             temporary buffer ("param.gather.<unit>", category param) and release() frees it, once
//             before a unit's forward and again before its backward (§5.3).
// acquire/release nest (a tied embedding is acquired twice by one micro-batch).
#pragma once

#include <functional>
#include <map>
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
  ParamStore(std::vector<const model::UnitLayout*> units, int zero, GradientSync& dp, MemoryLedger& ledger);

  // Shard-invariant initialization of everything this rank holds.
  void initialize(uint64_t seed, float init_std);

  const float* acquire(int unit) override;
  void release(int unit) override;

  // The pieces the optimizer updates (the owned dp-shard, or the whole unit at zero 0).
  std::vector<OwnedPiece> owned();
  // Pieces this rank contributes to logical-tensor evidence: each element of the dp group's copy
  // exactly once: its shard's range of every unit (zero 0: the same range of its full replica).
  std::vector<OwnedPiece> evidence_pieces();
  // zero 1/2: all-gather the updated shards into the full buffers. No-op at zero 0/3.
  void gather_after_update();
  // XXH3-128 over this rank's full parameter buffers (zero < 3) or shards (zero 3): replica check.
  Digest128 replica_digest() const;
  int zero() const { return zero_; }
  // Intervention point for the fault injector (parallel/fault_injector.h): zero 3's acquire() sends
  // gather_source(unit, shard) instead of the owned shard into the all-gather. Unset: the shard.
  using GatherSource = std::function<const float*(int unit, const float* shard)>;
  void set_gather_source(GatherSource source) { gather_source_ = std::move(source); }

 private:
  struct Unit {
    const model::UnitLayout* layout;
    ShardRange range;  // owned dp-shard
    Tensor full;       // zero < 3
    Tensor shard;      // zero 3
    Tensor gathered;   // zero 3, while acquired
    int refs = 0;
  };
  Unit& unit(int id);
  std::vector<Unit> units_;
  int zero_;
  GradientSync& dp_;
  MemoryLedger& ledger_;
  Tensor send_shard_;  // zero 1/2: staging for the all-gather's send side (category comm)
  GatherSource gather_source_;
};

}  // namespace sp::parallel
