#include "parallel/grad_store.h"

#include <fmt/format.h>

#include <cstring>

namespace sp::parallel {

GradStore::GradStore(std::vector<const model::UnitLayout*> units, int64_t k, int zero, GradientSync& dp,
                     MemoryLedger& ledger, comm::TraceContext& trace)
    : k_(k), zero_(zero), dp_(dp), ledger_(ledger), trace_(trace) {
  for (const model::UnitLayout* u : units) {
    Unit x(u, shard_range_of(u->numel, dp.dp_size(), dp.dp_rank()));
    if (zero >= 1) x.shard = Tensor(ledger, "grad." + u->name + ".shard", Category::kGrad, {x.range.size()});
    units_.push_back(std::move(x));
  }
}

GradStore::Unit& GradStore::unit(int id) {
  for (Unit& u : units_)
    if (u.layout->id == id) return u;
  SP_CHECK(false, "unit {} has no gradients on this rank", id);
  __builtin_unreachable();
}

void GradStore::begin_step(int64_t step) {
  step_ = step;
  for (Unit& u : units_) {
    SP_CHECK(u.current == nullptr && u.acc.depth() == 0, "unit {} has a pending leaf at step start", u.layout->name);
    u.free.clear();
    for (Tensor& t : u.buffers) u.free.push_back(t.f32());
    u.total = nullptr;
    u.leaves = 0;
    u.synced = false;
  }
}

float* GradStore::leaf(int id) {
  Unit& u = unit(id);
  if (u.current == nullptr) {
    SP_CHECK(!u.synced, "unit {} asked for a leaf after its sync in step {}", u.layout->name, step_);
    if (u.free.empty()) {
      u.buffers.emplace_back(ledger_, fmt::format("grad.{}.b{}", u.layout->name, u.buffers.size()), Category::kGrad,
                             Shape{u.layout->numel});
      u.current = u.buffers.back().f32();  // fresh from the ledger: already zero
    } else {
      u.current = u.free.back();
      u.free.pop_back();
      if (!hooks_.zero_reused || hooks_.zero_reused(id))
        std::memset(u.current, 0, sizeof(float) * static_cast<size_t>(u.layout->numel));
    }
  }
  return u.current;
}

void GradStore::done(int id) {
  Unit& u = unit(id);
  SP_CHECK(u.current != nullptr, "done() for unit {} without a leaf", u.layout->name);
  if (hooks_.leaf_done) hooks_.leaf_done(id, u.current, u.layout->numel);
  for (float* f : u.acc.push(u.current)) u.free.push_back(f);
  u.current = nullptr;
  if (++u.leaves == k_) {
    u.total = u.acc.finish(u.free);
    sync(u);
  }
}

void GradStore::sync(Unit& u) {
  comm::ScopedPhase phase(trace_, comm::Phase::kGradSync, step_);
  const int64_t n = u.layout->numel;
  const bool run = !hooks_.sync || hooks_.sync(u.layout->id, u.total, n);
  if (zero_ == 0) {
    if (run) dp_.all_reduce(u.total, n);
  } else {
    if (run)
      dp_.reduce_scatter(u.total, u.shard.f32(), n);
    else
      std::memcpy(u.shard.f32(), u.total + u.range.begin, sizeof(float) * static_cast<size_t>(u.range.size()));
    if (zero_ >= 2) {
      u.buffers.clear();  // frees every full-size buffer of the unit
      u.free.clear();
      u.total = nullptr;
    }
  }
  u.synced = true;
}

bool GradStore::complete() const {
  for (const Unit& u : units_)
    if (!u.synced) return false;
  return true;
}

std::vector<const float*> GradStore::owned_grads() const {
  std::vector<const float*> out;
  for (const Unit& u : units_) out.push_back(zero_ == 0 ? u.total : u.shard.f32());
  return out;
}

std::vector<float*> GradStore::spent_totals() {
  SP_CHECK_EQ(zero_, 0, "spent_totals: only zero 0 keeps the full unit totals");
  std::vector<float*> out;
  for (Unit& u : units_) {
    SP_CHECK(u.total != nullptr, "spent_totals: unit {} has no total this step", u.layout->name);
    out.push_back(u.total);
  }
  return out;
}

std::vector<OwnedPiece> GradStore::evidence_pieces() {
  std::vector<OwnedPiece> out;
  for (Unit& u : units_) {
    if (zero_ == 0)  // replicas: each dp rank its 1/dp range (ParamStore::evidence_pieces)
      out.push_back({u.layout, u.range.begin, u.range.end, u.total + u.range.begin});
    else
      out.push_back({u.layout, u.range.begin, u.range.end, u.shard.f32()});
  }
  return out;
}

}  // namespace sp::parallel
