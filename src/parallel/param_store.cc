#include "parallel/param_store.h"

#include <algorithm>
#include <cstring>

#include "tensor/float16.h"

namespace sp::parallel {

ParamStore::ParamStore(std::vector<const model::UnitLayout*> units, int zero, GradientSync& dp, MemoryLedger& ledger,
                       DType working)
    : zero_(zero), dp_(dp), ledger_(ledger), working_(working) {
  SP_CHECK(working == DType::kF32 || is_float16(working), "ParamStore working dtype {}", dtype_name(working));
  int64_t max_shard = 0;
  for (const model::UnitLayout* u : units) {
    Unit x{u, shard_range_of(u->numel, dp.dp_size(), dp.dp_rank()), {}, {}, {}, {}, 0};
    if (zero < 3)
      x.full = Tensor(ledger, "param." + u->name, Category::kParam, {u->numel}, working);
    else
      x.shard = Tensor(ledger, "param." + u->name + ".shard", Category::kParam, {x.range.size()}, working);
    if (mixed())
      x.master = Tensor(ledger, "optim.master." + u->name, Category::kOptim, {zero == 0 ? u->numel : x.range.size()});
    max_shard = std::max(max_shard, x.range.size());
    units_.push_back(std::move(x));
  }
  if ((zero == 1 || zero == 2) && dp.dp_size() > 1)
    send_shard_ = Tensor(ledger, "comm.param_shard", Category::kComm, {max_shard}, working);
}

ParamStore::Unit& ParamStore::unit(int id) {
  for (Unit& u : units_)
    if (u.layout->id == id) return u;
  SP_CHECK(false, "unit {} is not held by this rank", id);
  __builtin_unreachable();
}

void ParamStore::initialize(uint64_t seed, float init_std) {
  // Every rank derives the same logical values (shard-invariant), so no communication is needed.
  for (Unit& u : units_) {
    if (zero_ < 3 && !mixed()) {
      model::init_unit(u.full.f32(), *u.layout, seed, init_std);
    } else if (zero_ == 3) {  // only the piece this rank holds: the fp32 master in mixed precision
      float* owned = mixed() ? u.master.f32() : u.shard.f32();
      model::init_unit_range(owned, *u.layout, seed, init_std, u.range.begin, u.range.end);
      if (mixed()) float16_from_f32(u.shard.float16(), owned, u.range.size(), working_);
    } else {  // mixed precision, ZeRO-0/1/2: the working copy is whole, the master the owned piece
      std::vector<float> tmp(static_cast<size_t>(u.layout->numel));
      model::init_unit(tmp.data(), *u.layout, seed, init_std);
      const float* owned = tmp.data() + (zero_ == 0 ? 0 : u.range.begin);
      std::memcpy(u.master.f32(), owned, sizeof(float) * static_cast<size_t>(u.master.numel()));
      float16_from_f32(u.full.float16(), tmp.data(), u.layout->numel, working_);
    }
  }
}

ConstBufView ParamStore::acquire(int id) {
  Unit& u = unit(id);
  if (zero_ < 3) return u.full.view();
  if (dp_.dp_size() == 1) return u.shard.view();
  if (u.refs++ == 0) {
    u.gathered = Tensor(ledger_, "param.gather." + u.layout->name, Category::kParam, {u.layout->numel}, working_);
    const void* send = gather_source_ ? gather_source_(id, u.shard.raw()) : u.shard.raw();
    dp_.all_gather({send, u.shard.numel(), working_}, u.gathered.view());
  }
  return u.gathered.view();
}

void ParamStore::release(int id) {
  if (zero_ < 3 || dp_.dp_size() == 1) return;
  Unit& u = unit(id);
  SP_CHECK_GT(u.refs, 0, "release of unit {} that is not acquired", u.layout->name);
  if (--u.refs == 0) u.gathered.reset();
}

std::pair<const void*, size_t> ParamStore::working_shard(int id) {
  Unit& u = unit(id);
  SP_CHECK(zero_ == 3, "working_shard of unit {} needs ZeRO-3", u.layout->name);
  return {u.shard.raw(), u.shard.nbytes()};
}

std::vector<OwnedPiece> ParamStore::owned() {
  std::vector<OwnedPiece> out;
  for (Unit& u : units_) {
    const int64_t begin = zero_ == 0 ? 0 : u.range.begin, end = zero_ == 0 ? u.layout->numel : u.range.end;
    if (mixed())
      out.push_back({u.layout, begin, end, u.master.f32()});
    else if (zero_ < 3)
      out.push_back({u.layout, begin, end, u.full.f32() + begin});
    else
      out.push_back({u.layout, begin, end, u.shard.f32()});
  }
  return out;
}

std::vector<OwnedPiece> ParamStore::evidence_pieces() {
  if (zero_ > 0) return owned();
  // Replicas (zero 0): each dp rank summarizes its 1/dp range of every unit, so the cost is shared
  // and a replica that diverged shows in the records too, not only in the replica check. Mixed
  // precision: of the fp32 masters (the parameters; the working copy is their rounding).
  std::vector<OwnedPiece> out;
  for (Unit& u : units_)
    out.push_back({u.layout, u.range.begin, u.range.end, (mixed() ? u.master : u.full).f32() + u.range.begin});
  return out;
}

void ParamStore::publish() {
  if (mixed())
    for (Unit& u : units_) {
      Tensor& working = zero_ == 3 ? u.shard : u.full;
      convert(working.view().slice(zero_ == 1 || zero_ == 2 ? u.range.begin : 0, u.master.numel()), u.master.view());
    }
  if (zero_ == 0 || zero_ == 3 || dp_.dp_size() == 1) return;
  for (Unit& u : units_) {
    const BufView send = send_shard_.view().slice(0, u.range.size());
    convert(send, u.full.view().slice(u.range.begin, u.range.size()));
    dp_.all_gather(send, u.full.view());
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
