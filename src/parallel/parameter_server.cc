#include "parallel/parameter_server.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "comm/staleness.h"
#include "core/check.h"
#include "kernels/reduce.h"

namespace sp::parallel {
namespace {

std::vector<optim::OwnedRange> ranges_of(const std::vector<plan::PsPiece>& pieces) {
  std::vector<optim::OwnedRange> out;
  for (const plan::PsPiece& p : pieces) out.push_back({p.unit, p.begin, p.end});
  return out;
}

// Pushes and pulls carry one piece each, tagged with its unit id (unique per worker-server pair).
int tag_of(const plan::PsPiece& p) { return p.unit->id; }

}  // namespace

std::optional<comm::PsTopology> ps_topology(const plan::RunPlan& plan) {
  const comm::RoleMap roles = plan.roles();
  if (!roles.parameter_server()) return std::nullopt;
  const std::vector<model::UnitLayout> layouts = plan::ps_unit_layouts(plan.config.model);
  std::vector<const model::UnitLayout*> units;
  for (const model::UnitLayout& u : layouts) units.push_back(&u);
  const plan::PsKeySpace keys(units, roles);
  comm::PsTopology t{.roles = roles, .keys = keys.keys()};
  for (int j = 0; j < roles.servers(); ++j) {
    nlohmann::json pieces = nlohmann::json::array();
    for (const plan::PsPiece& p : keys.pieces(j))
      pieces.push_back({{"unit", p.unit->name}, {"begin", p.begin}, {"end", p.end}});
    t.pieces.push_back(std::move(pieces));
  }
  return t;
}

// ---- worker ----

PsWorkerUpdate::PsWorkerUpdate(ParamStore& params, GradStore& grads, comm::Communicator& ps, const comm::RoleMap& roles,
                               plan::PsKeySpace keys, comm::TraceContext& trace, MemoryLedger& ledger, int staleness)
    : params_(params),
      grads_(grads),
      ps_(ps),
      roles_(roles),
      keys_(std::move(keys)),
      trace_(trace),
      optimizer_(optim::AdamWConfig{}, {}, ledger),
      staleness_(staleness) {
  SP_CHECK_EQ(params.zero(), 0, "a parameter-server worker holds a full replica");
}

std::vector<int64_t> PsWorkerUpdate::versions(int64_t) {
  if (staleness_ == 0) return {};
  return {computed_version_};
}

void PsWorkerUpdate::exchange(int64_t step) {
  // Every unit's local sum over this worker's k micro-batches (GradStore, synchronized over nothing:
  // the workers' dp axis is a one-rank communicator) goes to the servers that own its keys.
  comm::ScopedPhase phase(trace_, comm::Phase::kPush, step);
  computed_version_ = held_version_;
  const std::vector<model::UnitPiece> units = params_.owned();
  const std::vector<ConstBufView> totals = grads_.owned_grads();
  std::vector<std::unique_ptr<comm::Request>> sent;
  for (size_t i = 0; i < units.size(); ++i)
    for (const auto& [j, p] : keys_.pieces_of_unit(units[i].unit))
      if (!hooks_.push_sent || hooks_.push_sent(step, j)) {
        const ConstBufView piece = totals[i].slice(p.begin, p.size());
        sent.push_back(ps_.isend(piece.f32(), piece.count, DType::kF32, roles_.server_rank(j), tag_of(p)));
      }
  for (auto& r : sent) r->wait();
}

void PsWorkerUpdate::pull(int64_t step) {
  // After a step: phase "pull"; after a load (step −1): the caller's "checkpoint" phase. The values
  // land in the replica when the schedule refreshes it (BSP: always), else in the spent gradient sums
  // (the servers hold the step's gradient now): the worker keeps computing on its cached version.
  std::optional<comm::ScopedPhase> phase;
  if (step >= 0) phase.emplace(trace_, comm::Phase::kPull, step);
  const bool scheduled = step < 0 || comm::refreshes_after(step, ps_.rank(), staleness_);
  const bool take = scheduled && (step < 0 || !hooks_.pull_taken || hooks_.pull_taken(step));
  const std::vector<model::UnitPiece> units = params_.owned();
  std::vector<BufView> into;
  if (take)
    for (const model::UnitPiece& u : units) into.push_back(u.view());
  else
    into = grads_.spent_totals();
  std::vector<std::unique_ptr<comm::Request>> received;
  for (size_t i = 0; i < units.size(); ++i)
    for (const auto& [j, p] : keys_.pieces_of_unit(units[i].unit)) {
      const BufView piece = into[i].slice(p.begin, p.size());
      received.push_back(ps_.irecv(piece.f32(), piece.count, DType::kF32, roles_.server_rank(j), tag_of(p)));
    }
  for (auto& r : received) r->wait();
  if (take) held_version_ = step + 1;  // after a load (step −1) the loaded state is version 0 of the run's SSP
}

void PsWorkerUpdate::update(int64_t step, double, float, bool apply, const std::function<void()>& before) {
  // The servers apply the update (or skip it, as every rank does on non-finite gradients); the worker
  // counts the step like an optimizer would and pulls the values back either way.
  if (apply) {
    if (before) before();
    optimizer_.set_steps_taken(optimizer_.steps_taken() + 1);
  }
  pull(step);
}

void PsWorkerUpdate::state_loaded() { pull(-1); }

namespace {
// Every worker holds a full replica equal to worker 0's after the pull; a server holds none.
int ps_replica_of(const comm::RoleMap& roles, int world_rank) {
  return roles.workers() == 1 || roles.is_server(world_rank) ? -1 : 0;
}
}  // namespace

int PsWorkerUpdate::replica_of(int world_rank) const { return ps_replica_of(roles_, world_rank); }

// ---- server ----

int64_t PsServerUpdate::staging_floats(const std::vector<plan::PsPiece>& pieces, int workers) {
  int64_t most = 0;
  for (const plan::PsPiece& p : pieces) most = std::max(most, p.size());
  return most * workers;
}

PsServerUpdate::PsServerUpdate(const std::vector<model::UnitLayout>& layouts, comm::Communicator& ps,
                               const comm::RoleMap& roles, int server, const optim::AdamWConfig& adamw,
                               comm::TraceContext& trace, MemoryLedger& ledger)
    : ps_(ps),
      roles_(roles),
      keys_(
          [&] {
            std::vector<const model::UnitLayout*> u;
            for (const model::UnitLayout& l : layouts) u.push_back(&l);
            return u;
          }(),
          roles),
      trace_(trace),
      optimizer_(adamw, ranges_of(keys_.pieces(server)), ledger) {
  const std::vector<plan::PsPiece> mine = keys_.pieces(server);
  for (const plan::PsPiece& p : mine)
    pieces_.push_back({p, Tensor(ledger, "param." + p.unit->name + ".ps", Category::kParam, {p.size()}),
                       Tensor(ledger, "grad." + p.unit->name + ".ps", Category::kGrad, {p.size()})});
  staging_ = Tensor(ledger, "comm.ps_push", Category::kComm, {staging_floats(mine, roles_.workers())});
}

void PsServerUpdate::initialize(uint64_t seed, float init_std) {
  // The whole unit in scratch, then the owned range: every rank derives the same logical values.
  for (Piece& p : pieces_) {
    std::vector<float> tmp(static_cast<size_t>(p.range.unit->numel));
    model::init_unit(tmp.data(), *p.range.unit, seed, init_std);
    std::memcpy(p.param.f32(), tmp.data() + p.range.begin, sizeof(float) * static_cast<size_t>(p.range.size()));
  }
}

void PsServerUpdate::exchange(int64_t step) {
  // Piece by piece: worker w's push lands in staging block w; the canonical tree over the W blocks
  // (leaf w = worker w, as the deterministic dp all-reduce's leaf r = dp rank r) is the gradient.
  comm::ScopedPhase phase(trace_, comm::Phase::kPush, step);
  const int W = roles_.workers();
  for (Piece& p : pieces_) {
    const int64_t n = p.range.size();
    std::vector<BufView> leaves;
    std::vector<std::unique_ptr<comm::Request>> received;
    for (int w = 0; w < W; ++w) {
      leaves.push_back(staging_.view().slice(w * n, n));
      if (!hooks_.push_received || hooks_.push_received(step, w))
        received.push_back(ps_.irecv(leaves.back().f32(), n, DType::kF32, w, tag_of(p.range)));
      else
        std::memset(leaves.back().data, 0, leaves.back().bytes());  // the dropped push
    }
    for (auto& r : received) r->wait();
    kernels::canonical_tree_sum_inplace(leaves);
    convert(p.grad.view(), leaves[0]);
  }
  received_ = true;
}

std::vector<model::UnitPiece> PsServerUpdate::gradient_pieces() {
  std::vector<model::UnitPiece> out;
  for (Piece& p : pieces_) out.push_back({p.range.unit, p.range.begin, p.range.end, p.grad.f32()});
  return out;
}

std::vector<model::UnitPiece> PsServerUpdate::owned_parameters() {
  std::vector<model::UnitPiece> out;
  for (Piece& p : pieces_) out.push_back({p.range.unit, p.range.begin, p.range.end, p.param.f32()});
  return out;
}

void PsServerUpdate::pull(int64_t step) {
  std::optional<comm::ScopedPhase> phase;
  if (step >= 0) phase.emplace(trace_, comm::Phase::kPull, step);
  std::vector<std::unique_ptr<comm::Request>> sent;
  for (Piece& p : pieces_)
    for (int w = 0; w < roles_.workers(); ++w)
      sent.push_back(ps_.isend(p.param.f32(), p.range.size(), DType::kF32, w, tag_of(p.range)));
  for (auto& r : sent) r->wait();
}

void PsServerUpdate::update(int64_t step, double lr, float clip, bool apply, const std::function<void()>& before) {
  SP_CHECK(received_, "server: step {} updates before every push arrived", step);
  received_ = false;
  if (apply) {
    if (before) before();
    std::vector<float*> params;
    std::vector<ConstBufView> grads;
    for (Piece& p : pieces_) {
      params.push_back(p.param.f32());
      grads.push_back(p.grad.view());
    }
    const int times = hooks_.updates ? hooks_.updates(step) : 1;
    for (int i = 0; i < times; ++i) optimizer_.step(params, grads, lr, clip);
  }
  pull(step);
}

std::vector<StatePiece> PsServerUpdate::state() {
  std::vector<StatePiece> out;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    Piece& p = pieces_[i];
    out.push_back({p.range.unit, p.range.begin, p.range.end, p.param.f32(), optimizer_.exp_avg(i).f32(),
                   optimizer_.exp_avg_sq(i).f32()});
  }
  return out;
}

void PsServerUpdate::state_loaded() { pull(-1); }

int PsServerUpdate::replica_of(int world_rank) const { return ps_replica_of(roles_, world_rank); }

}  // namespace sp::parallel
