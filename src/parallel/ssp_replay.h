// SspReplay: one process replaying a W-worker parameter-server run under the fixed staleness schedule
// (comm/staleness.h) — the single-process simulation SSP is proven against (docs/ps.md §SSP). It is
// not the parameter server: no server, no push or pull. Engine runs global micro-batches [w·k, (w+1)·k)
// (k = M/W) of each step on worker w's cached replica, in worker order, into the one GradStore, whose
// canonical tree over the M leaves has each worker's k leaves as a subtree (k a power of two): the sum a
// server forms over the workers' pushes. The optimizer then updates the one ParamStore (the newest
// version) and after_update() refreshes the caches the schedule refreshes.
// Invariant: cache w holds version stale_version(t, w, s) while step t runs; with s = 0 there are no
// caches (every worker computes on the newest version: the replay is the dp = 1 reference itself).
#pragma once

#include <cstdint>
#include <vector>

#include "model/stage_hooks.h"
#include "model/weights.h"
#include "parallel/param_store.h"
#include "plan/ledger_model.h"

namespace sp::parallel {

class SspReplay {
 public:
  // units: the dp = 1 rank's units (every unit); newest: the store the optimizer updates.
  SspReplay(std::vector<const model::UnitLayout*> units, ParamStore& newest, int workers, int staleness,
            MemoryLedger& ledger);
  int workers() const { return workers_; }
  // What worker w's micro-batches read: its cache, or the newest parameters when s = 0.
  model::ParamSource& replica(int w);
  // After initialization or a load: every worker holds the newest parameters (version 0).
  void reset();
  // The versions the workers compute step `step` on (by worker).
  std::vector<int64_t> versions() const { return held_; }
  // After step `step`'s update: the workers the schedule refreshes take the newest parameters.
  void after_update(int64_t step);
  // The caches in the ledger prediction ("param.<unit>.replay<w>", category param, live from setup).
  static void add_to_prediction(plan::LedgerPrediction& p, const std::vector<const model::UnitLayout*>& units,
                                int workers, int staleness);

 private:
  class Cache final : public model::ParamSource {
   public:
    ConstBufView acquire(int unit) override;
    void release(int) override {}
    std::vector<std::pair<const model::UnitLayout*, Tensor>> units;
  };
  void copy_newest(int w);
  ParamStore& newest_;
  int workers_, staleness_;
  std::vector<Cache> caches_;  // by worker; empty when s = 0
  std::vector<int64_t> held_;  // version each cache holds
};

}  // namespace sp::parallel
