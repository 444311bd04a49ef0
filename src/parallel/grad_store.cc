#include "parallel/grad_store.h"

#include <fmt/format.h>

#include <cstring>

#include "tensor/float16.h"

namespace sp::parallel {

GradStore::GradStore(std::vector<const model::UnitLayout*> units, int64_t k, int zero, GradientSync& dp,
                     MemoryLedger& ledger, comm::TraceContext& trace, DType dtype)
    : k_(k), zero_(zero), dp_(dp), ledger_(ledger), trace_(trace), dtype_(dtype) {
  SP_CHECK(dtype == DType::kF32 || is_float16(dtype), "GradStore dtype {}", dtype_name(dtype));
  for (const model::UnitLayout* u : units) {
    Unit x(u, shard_range_of(u->numel, dp.dp_size(), dp.dp_rank()), dtype);
    if (zero >= 1) x.shard = Tensor(ledger, "grad." + u->name + ".shard", Category::kGrad, {x.range.size()}, dtype);
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
  widened_.reset();
  for (Unit& u : units_) {
    SP_CHECK(u.current == nullptr && u.acc.depth() == 0, "unit {} has a pending leaf at step start", u.layout->name);
    u.free.clear();
    u.free16.clear();
    for (Tensor& t : u.buffers) {
      if (mixed())
        u.free16.push_back(t.float16());
      else
        u.free.push_back(t.f32());
    }
    u.total = nullptr;
    u.total16 = nullptr;
    u.leaves = 0;
    u.synced = false;
  }
}

float* GradStore::leaf(int id) {
  Unit& u = unit(id);
  if (u.current == nullptr && mixed()) {
    SP_CHECK(!u.synced, "unit {} asked for a leaf after its sync in step {}", u.layout->name, step_);
    u.leaf32 = Tensor(ledger_, "grad." + u.layout->name + ".leaf", Category::kGrad, {u.layout->numel});
    u.current = u.leaf32.f32();  // fresh from the ledger: already zero
  }
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
  if (mixed()) return done16(u);
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

void GradStore::done16(Unit& u) {
  // Round the fp32 leaf once into a 16-bit buffer (a reused one, or a new one while the leaf is still
  // live), free the leaf, and push the buffer into the 16-bit canonical tree.
  uint16_t* b = nullptr;
  const bool reused = !u.free16.empty();
  if (!reused) {
    u.buffers.emplace_back(ledger_, fmt::format("grad.{}.b{}", u.layout->name, u.buffers.size()), Category::kGrad,
                           Shape{u.layout->numel}, dtype_);
    b = u.buffers.back().float16();
  } else {
    b = u.free16.back();
    u.free16.pop_back();
  }
  if (reused && hooks_.zero_reused && !hooks_.zero_reused(u.layout->id)) {
    // Not "zeroed": the buffer's old values (a partial sum of the previous step) are added to the leaf.
    for (int64_t i = 0; i < u.layout->numel; ++i)
      u.current[i] += dtype_ == DType::kBF16 ? f32_from_bf16(b[i]) : f32_from_f16(b[i]);
  }
  float16_from_f32(b, u.current, u.layout->numel, dtype_);
  u.leaf32.reset();
  u.current = nullptr;
  for (uint16_t* f : u.acc.push16(b)) u.free16.push_back(f);
  if (++u.leaves == k_) {
    u.total16 = u.acc.finish16(u.free16);
    sync16(u);
    if (complete()) widen_synced();
  }
}

void GradStore::sync16(Unit& u) {
  comm::ScopedPhase phase(trace_, comm::Phase::kGradSync, step_);
  const int64_t n = u.layout->numel;
  const bool run = !hooks_.sync16 || hooks_.sync16(u.layout->id, u.total16, n, dtype_);
  if (zero_ == 0) {
    if (run) dp_.all_reduce16(u.total16, n, dtype_);
  } else {
    if (run)
      dp_.reduce_scatter16(u.total16, u.shard.float16(), n, dtype_);
    else
      std::memcpy(u.shard.float16(), u.total16 + u.range.begin, sizeof(uint16_t) * static_cast<size_t>(u.range.size()));
    if (zero_ >= 2) {
      u.buffers.clear();
      u.free16.clear();
      u.total16 = nullptr;
    }
  }
  u.synced = true;
}

void GradStore::widen_synced() {
  int64_t total = 0;
  for (const Unit& u : units_) total += u.range.size();
  widened_ = Tensor(ledger_, "grad.widened", Category::kGrad, {total});
  float* dst = widened_.f32();
  for (const Unit& u : units_) {
    const uint16_t* src = zero_ == 0 ? u.total16 + u.range.begin : u.shard.float16();
    f32_from_float16(dst, src, u.range.size(), dtype_);
    dst += u.range.size();
  }
}

std::vector<const uint16_t*> GradStore::owned_grads16() const {
  SP_CHECK(mixed(), "owned_grads16() of fp32 gradients");
  std::vector<const uint16_t*> out;
  for (const Unit& u : units_) out.push_back(zero_ == 0 ? u.total16 : u.shard.float16());
  return out;
}

bool GradStore::complete() const {
  for (const Unit& u : units_)
    if (!u.synced) return false;
  return true;
}

std::vector<const float*> GradStore::owned_grads() const {
  SP_CHECK(!mixed(), "owned_grads() of {} gradients", dtype_name(dtype_));
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
  if (mixed()) {  // the widened copy of the same ranges
    SP_CHECK(widened_.defined(), "gradient evidence of step {} before every unit was synchronized", step_);
    float* p = widened_.f32();
    for (Unit& u : units_) {
      out.push_back({u.layout, u.range.begin, u.range.end, p});
      p += u.range.size();
    }
    return out;
  }
  for (Unit& u : units_) {
    if (zero_ == 0)  // replicas: each dp rank its 1/dp range (ParamStore::evidence_pieces)
      out.push_back({u.layout, u.range.begin, u.range.end, u.total + u.range.begin});
    else
      out.push_back({u.layout, u.range.begin, u.range.end, u.shard.f32()});
  }
  return out;
}

}  // namespace sp::parallel
