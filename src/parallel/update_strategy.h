// UpdateStrategy: how one step's gradients become the next parameters on this rank — the part of a
// step that differs between the two architectures (docs/architecture.md §"A run", docs/ps.md):
//   all-reduce (AllReduceUpdate, here): peers synchronize every unit's gradient over dp as its last
//     leaf is done (GradStore), each updates what it owns (ZeRO) and the owners' shards are gathered;
//   parameter server (parallel/parameter_server.h): workers push their local gradient sums to the
//     servers that own the key ranges; each server sums them in the canonical order, updates, and
//     the workers pull the new values back.
// Engine::step composes one and calls it at three points (exchange, versions, update); the checkpoint
// glue asks it what this rank owns. Not the stores the model reads and writes (ParamStore, GradStore).
// Invariant: over all world ranks, gradient_pieces() (after exchange) and parameter_pieces() (after
// update) cover every element of every unit exactly once, so world-wide summaries are the logical tensors'.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/process_grid.h"
#include "comm/trace_context.h"
#include "core/hash.h"
#include "model/weights.h"
#include "optim/adamw.h"
#include "parallel/grad_store.h"
#include "parallel/param_store.h"

namespace sp::parallel {

// One owned piece of a unit with its parameters and both AdamW moments over the same range
// (`begin`/`end`: elements of the unit's flat, tensor-parallel local buffer; pointers at `begin`).
struct StatePiece {
  const model::UnitLayout* unit = nullptr;
  int64_t begin = 0, end = 0;
  float* param = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
};

class UpdateStrategy {
 public:
  virtual ~UpdateStrategy() = default;
  // After the last micro-batch's backward: the step's gradients are complete where they are applied.
  virtual void exchange(int64_t step) = 0;
  virtual bool gradients_complete() const = 0;
  // The parameter version each worker computed step `step` on, by worker (docs/ps.md §"Not yet", SSP); empty
  // when every worker computes on the newest parameters by construction (all-reduce).
  virtual std::vector<int64_t> versions(int64_t step) = 0;
  virtual std::vector<model::UnitPiece> gradient_pieces() = 0;
  virtual std::vector<model::UnitPiece> parameter_pieces() = 0;
  // The optimizer update of what this rank owns (clip: the clipping coefficient) and the distribution of
  // the new values. apply = false: the update is skipped (non-finite gradients) on every rank alike.
  // `before` runs right before the optimizer touches anything (the fault injector's hook point).
  virtual void update(int64_t step, double lr, float clip, bool apply, const std::function<void()>& before) = 0;
  // What this rank writes to a checkpoint (nothing for a replica that does not save).
  virtual std::vector<StatePiece> state() = 0;
  virtual bool saves_state() const = 0;
  // The pieces whose values are the parameters this rank holds (set from a checkpoint or weights).
  virtual std::vector<model::UnitPiece> owned_parameters() = 0;
  // After owned parameters were written: every copy consistent again (a collective).
  virtual void state_loaded() = 0;
  virtual optim::AdamW& optimizer() = 0;
  // The world rank whose parameter replica `world_rank`'s must equal bit for bit after a step (the
  // dp-replica check), or −1 when there is none to compare.
  virtual int replica_of(int world_rank) const = 0;
};

// DP and ZeRO-1/2/3 (docs/equivalence.md §2): the stores synchronize and shard; this updates the owned
// pieces and gathers ZeRO-1/2 shards back into the replicas.
class AllReduceUpdate final : public UpdateStrategy {
 public:
  // dp_rank: this rank's coordinate (at ZeRO 0 only dp rank 0 of each replica group saves).
  AllReduceUpdate(ParamStore& params, GradStore& grads, const optim::AdamWConfig& adamw, MemoryLedger& ledger,
                  const comm::ProcessGrid& grid, int zero, int dp_rank);
  void exchange(int64_t) override {}  // every unit was synchronized as its last leaf was done
  bool gradients_complete() const override { return grads_.complete(); }
  std::vector<int64_t> versions(int64_t) override { return {}; }
  std::vector<model::UnitPiece> gradient_pieces() override { return grads_.evidence_pieces(); }
  std::vector<model::UnitPiece> parameter_pieces() override { return params_.evidence_pieces(); }
  void update(int64_t step, double lr, float clip, bool apply, const std::function<void()>& before) override;
  std::vector<StatePiece> state() override;
  bool saves_state() const override;
  std::vector<model::UnitPiece> owned_parameters() override { return params_.owned(); }
  void state_loaded() override { params_.publish(); }
  optim::AdamW& optimizer() override { return optimizer_; }
  int replica_of(int world_rank) const override;

 private:
  ParamStore& params_;
  GradStore& grads_;
  optim::AdamW optimizer_;
  comm::ProcessGrid grid_;
  int zero_;
  int dp_rank_;
};

}  // namespace sp::parallel
