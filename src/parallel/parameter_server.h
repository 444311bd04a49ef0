// The parameter-server architecture (docs/ps.md): W worker ranks and S server ranks (comm/roles.h).
// The key space is every unit's flat buffer laid end to end in unit-id order; server j owns the
// contiguous keys RoleMap::key_range(keys, j), i.e. a few pieces of units (plan::PsKeySpace::pieces).
//   worker (PsWorkerUpdate): runs its k = M/W micro-batches on a full replica; exchange() pushes every
//     unit's local gradient sum, piece by piece, to the piece's server (phase "push"); update() pulls
//     the new values of every piece back into the replica (phase "pull");
//   server (PsServerUpdate): holds its pieces' parameters, both AdamW moments and the summed gradient;
//     exchange() receives the W pushes of each piece and sums them over the canonical tree in worker
//     order (kernels/reduce.h), the same tree the deterministic dp all-reduce uses, so BSP is bitwise
//     the single device's; update() applies AdamW and sends every worker the piece (the pull).
// Messages go point to point over the "ps" communicator with tag = unit id. Bounded staleness (SSP,
// staleness s > 0, comm/staleness.h): the traffic is BSP's, but worker w takes the pull of step t
// into its replica only when the fixed schedule refreshes it (refreshes_after(t, w, s)); otherwise the
// pulled values land in its spent gradient buffers and it computes the next step on its cached version.
// Invariant: the servers' pieces cover every element of every unit exactly once, so the servers'
// gradient and parameter pieces are the world's evidence (a worker contributes none).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "comm/communicator.h"
#include "comm/roles.h"
#include "comm/topology.h"
#include "comm/trace_context.h"
#include "parallel/update_strategy.h"
#include "plan/ps_keys.h"
#include "plan/run_plan.h"

namespace sp::parallel {

// Intervention points for the fault injector (parallel/fault_injector.h); each unset one keeps the
// protocol. step: the step being exchanged or updated.
struct PsHooks {
  std::function<bool(int64_t step, int server)> push_sent;      // worker: false skips its push to server j
  std::function<bool(int64_t step, int worker)> push_received;  // server: false drops worker w's push (zeros)
  std::function<int(int64_t step)> updates;                     // server: optimizer steps applied (1)
  std::function<bool(int64_t step)> pull_taken;                 // worker: false keeps the old replica
};

class PsWorkerUpdate final : public UpdateStrategy {
 public:
  PsWorkerUpdate(ParamStore& params, GradStore& grads, comm::Communicator& ps, const comm::RoleMap& roles,
                 plan::PsKeySpace keys, comm::TraceContext& trace, MemoryLedger& ledger, int staleness);
  void exchange(int64_t step) override;
  bool gradients_complete() const override { return grads_.complete(); }
  // SSP: {the version this worker computed `step` on}; BSP: empty.
  std::vector<int64_t> versions(int64_t) override;
  // The version the replica holds now (after a pull: the one the next step computes on).
  int64_t held_version() const { return held_version_; }
  void set_hooks(PsHooks hooks) { hooks_ = std::move(hooks); }
  std::vector<model::UnitPiece> gradient_pieces() override { return {}; }
  std::vector<model::UnitPiece> parameter_pieces() override { return {}; }
  void update(int64_t step, double lr, float clip, bool apply, const std::function<void()>& before) override;
  std::vector<StatePiece> state() override { return {}; }
  bool saves_state() const override { return false; }
  std::vector<model::UnitPiece> owned_parameters() override { return params_.owned(); }
  void state_loaded() override;
  optim::AdamW& optimizer() override { return optimizer_; }
  int replica_of(int world_rank) const override;

 private:
  void pull(int64_t step);
  ParamStore& params_;
  GradStore& grads_;
  comm::Communicator& ps_;
  comm::RoleMap roles_;
  plan::PsKeySpace keys_;
  comm::TraceContext& trace_;
  optim::AdamW optimizer_;  // owns no range: the servers update (it keeps the step count for checkpoints)
  int staleness_;
  int64_t held_version_ = 0;      // updates the replica's values include
  int64_t computed_version_ = 0;  // of the last step computed
  PsHooks hooks_;
};

class PsServerUpdate final : public UpdateStrategy {
 public:
  // layouts: every unit (tp = 1), in unit-id order; they must outlive this object.
  PsServerUpdate(const std::vector<model::UnitLayout>& layouts, comm::Communicator& ps, const comm::RoleMap& roles,
                 int server, const optim::AdamWConfig& adamw, comm::TraceContext& trace, MemoryLedger& ledger);
  // Shard-invariant initialization of the owned pieces.
  void initialize(uint64_t seed, float init_std);
  void exchange(int64_t step) override;
  bool gradients_complete() const override { return received_; }
  std::vector<int64_t> versions(int64_t) override { return {}; }
  std::vector<model::UnitPiece> gradient_pieces() override;
  std::vector<model::UnitPiece> parameter_pieces() override { return owned_parameters(); }
  void update(int64_t step, double lr, float clip, bool apply, const std::function<void()>& before) override;
  std::vector<StatePiece> state() override;
  bool saves_state() const override { return true; }
  std::vector<model::UnitPiece> owned_parameters() override;
  void state_loaded() override;
  optim::AdamW& optimizer() override { return optimizer_; }
  int replica_of(int world_rank) const override;  // as a worker answers it
  void set_hooks(PsHooks hooks) { hooks_ = std::move(hooks); }
  std::vector<const model::UnitLayout*> units() const { return keys_.units(); }
  // Floats of the push staging: W copies of the largest piece (category comm, "comm.ps_push").
  static int64_t staging_floats(const std::vector<plan::PsPiece>& pieces, int workers);

 private:
  struct Piece {
    plan::PsPiece range;
    Tensor param, grad;  // (size) each
  };
  void pull(int64_t step);
  comm::Communicator& ps_;
  comm::RoleMap roles_;
  plan::PsKeySpace keys_;
  comm::TraceContext& trace_;
  std::vector<Piece> pieces_;
  Tensor staging_;  // (W · max piece) category comm
  optim::AdamW optimizer_;
  bool received_ = false;
  PsHooks hooks_;
};

// What topology.json records of a parameter-server run (the roles, the key space and every server's
// pieces); none for an all-reduce run.
std::optional<comm::PsTopology> ps_topology(const plan::RunPlan& plan);

}  // namespace sp::parallel
