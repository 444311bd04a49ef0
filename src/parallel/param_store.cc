#include "parallel/param_store.h"

#include <algorithm>
#include <cstring>

namespace sp::parallel {

ParamStore::ParamStore(std::vector<const model::UnitLayout*> units, int zero, GradientSync& dp, MemoryLedger& ledger)
    : zero_(zero), dp_(dp), ledger_(ledger) {
  int64_t max_shard = 0;
  for (const model::UnitLayout* u : units) {
    Unit x{u, shard_range_of(u->numel, dp.dp_size(), dp.dp_rank()), {}, {}, {}, 0};
    if (zero < 3)
      x.full = Tensor(ledger, "param." + u->name, Category::kParam, {u->numel});
    else
      x.shard = Tensor(ledger, "param." + u->name + ".shard", Category::kParam, {x.range.size()});
    max_shard = std::max(max_shard, x.range.size());
    units_.push_back(std::move(x));
  }
  if ((zero == 1 || zero == 2) && dp.dp_size() > 1)
    send_shard_ = Tensor(ledger, "comm.param_shard", Category::kComm, {max_shard});
}

ParamStore::Unit& ParamStore::unit(int id) {
  for (Unit& u : units_)
    if (u.layout->id == id) return u;
  SP_CHECK(false, "unit {} is not held by this rank", id);
  __builtin_unreachable();
}

void ParamStore::initialize(uint64_t seed, float init_std) {
  for (Unit& u : units_) {
    if (zero_ < 3) {
      model::init_unit(u.full.f32(), *u.layout, seed, init_std);
    } else {
      // Initialize the whole unit in scratch and keep the owned range: every rank derives the same
      // logical values (shard-invariant), so no communication is needed.
      std::vector<float> tmp(static_cast<size_t>(u.layout->numel));
      model::init_unit(tmp.data(), *u.layout, seed, init_std);
      std::memcpy(u.shard.f32(), tmp.data() + u.range.begin, sizeof(float) * static_cast<size_t>(u.range.size()));
    }
  }
}

const float* ParamStore::acquire(int id) {
  Unit& u = unit(id);
  if (zero_ < 3) return u.full.f32();
  if (dp_.dp_size() == 1) return u.shard.f32();
  if (u.refs++ == 0) {
    u.gathered = Tensor(ledger_, "param.gather." + u.layout->name, Category::kParam, {u.layout->numel});
    const float* send = gather_source_ ? gather_source_(id, u.shard.f32()) : u.shard.f32();
    dp_.all_gather(send, u.gathered.f32(), u.layout->numel);
  }
  return u.gathered.f32();
}

void ParamStore::release(int id) {
  if (zero_ < 3 || dp_.dp_size() == 1) return;
  Unit& u = unit(id);
  SP_CHECK_GT(u.refs, 0, "release of unit {} that is not acquired", u.layout->name);
  if (--u.refs == 0) u.gathered.reset();
}

std::vector<OwnedPiece> ParamStore::owned() {
  std::vector<OwnedPiece> out;
  for (Unit& u : units_) {
    if (zero_ == 0)
      out.push_back({u.layout, 0, u.layout->numel, u.full.f32()});
    else if (zero_ < 3)
      out.push_back({u.layout, u.range.begin, u.range.end, u.full.f32() + u.range.begin});
    else
      out.push_back({u.layout, u.range.begin, u.range.end, u.shard.f32()});
  }
  return out;
}

std::vector<OwnedPiece> ParamStore::evidence_pieces() {
  if (zero_ > 0) return owned();
  // Replicas (zero 0): each dp rank summarizes its 1/dp range of every unit, so the cost is shared
  // and a replica that diverged shows in the records too, not only in the replica check.
  std::vector<OwnedPiece> out;
  for (Unit& u : units_) out.push_back({u.layout, u.range.begin, u.range.end, u.full.f32() + u.range.begin});
  return out;
}

void ParamStore::gather_after_update() {
  if (zero_ == 0 || zero_ == 3 || dp_.dp_size() == 1) return;
  for (Unit& u : units_) {
    std::memcpy(send_shard_.f32(), u.full.f32() + u.range.begin, sizeof(float) * static_cast<size_t>(u.range.size()));
    dp_.all_gather(send_shard_.f32(), u.full.f32(), u.layout->numel);
  }
}

Digest128 ParamStore::replica_digest() const {
  // Chain the per-unit XXH3-128 digests in unit order.
  std::vector<uint64_t> words;
  for (const Unit& u : units_) {
    const Tensor& t = zero_ < 3 ? u.full : u.shard;
    const Digest128 d = xxh3_128(t.raw(), t.nbytes());
    words.push_back(d.hi);
    words.push_back(d.lo);
  }
  return xxh3_128(words.data(), words.size() * sizeof(uint64_t));
}

}  // namespace sp::parallel
