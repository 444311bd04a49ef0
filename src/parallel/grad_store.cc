#include "parallel/grad_store.h"

#include <fmt/format.h>

#include <cstring>

#include "core/timer.h"
#include "tensor/float16.h"

namespace sp::parallel {

GradStore::GradStore(std::vector<const model::UnitLayout*> units, int64_t k, int zero, GradientSync& dp,
                     MemoryLedger& ledger, comm::TraceContext& trace, DType dtype, config::Reduction reduction,
                     int overlap)
    : k_(k),
      zero_(zero),
      dp_(dp),
      ledger_(ledger),
      trace_(trace),
      dtype_(dtype),
      one_buffer_(reduction == config::Reduction::kFast),
      overlap_(dp.dp_size() > 1 ? overlap : 0) {
  SP_CHECK_GE(overlap, 0, "overlap_buckets");
  SP_CHECK(dtype == DType::kF32 || is_float16(dtype), "GradStore dtype {}", dtype_name(dtype));
  SP_CHECK(!one_buffer_ || dtype == DType::kF32, "fast reduction with {} gradients (the plan refuses it)",
           dtype_name(dtype));
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
  SP_CHECK(in_flight_.empty(), "step {} begins with {} gradient syncs of step {} in flight", step, in_flight_.size(),
           step_);
  step_ = step;
  started_ = 0;
  spans_.clear();
  for (Unit& u : units_) {
    SP_CHECK(u.current.data == nullptr && u.acc.depth() == 0, "unit {} has a pending leaf at step start",
             u.layout->name);
    u.free.clear();
    for (Tensor& t : u.buffers) u.free.push_back(t.view());
    u.total = {};
    u.leaves = 0;
    u.synced = false;
  }
}

std::pair<BufView, bool> GradStore::take_buffer(Unit& u) {
  if (u.free.empty()) {
    u.buffers.emplace_back(ledger_, fmt::format("grad.{}.b{}", u.layout->name, u.buffers.size()), Category::kGrad,
                           Shape{u.layout->numel}, dtype_);
    return {u.buffers.back().view(), false};  // fresh from the ledger: already zero
  }
  const BufView b = u.free.back();
  u.free.pop_back();
  return {b, true};
}

BufView GradStore::leaf(int id) {
  progress();
  Unit& u = unit(id);
  if (u.current.data != nullptr) {  // handed out again: it may hold what the first holder wrote
    u.current_zero = false;
    return u.current;
  }
  SP_CHECK(!u.synced, "unit {} asked for a leaf after its sync in step {}", u.layout->name, step_);
  if (mixed()) {  // a fresh fp32 leaf, rounded into a 16-bit buffer by done()
    u.leaf32 = Tensor(ledger_, "grad." + u.layout->name + ".leaf", Category::kGrad, {u.layout->numel});
    u.current = u.leaf32.view();  // fresh from the ledger: already zero
    u.current_zero = true;
    return u.current;
  }
  u.current = accumulation_leaf(u);  // fp32: the leaf is the accumulation buffer itself
  return u.current;
}

bool GradStore::leaf_is_zero(int id) const {
  for (const Unit& u : units_)
    if (u.layout->id == id) return u.current.data != nullptr && u.current_zero;
  return false;
}

BufView GradStore::accumulation_leaf(Unit& u) {
  u.current_zero = false;
  if (one_buffer_ && u.leaves > 0) return u.total;  // fast: later micro-batches add into the running sum
  const auto [b, reused] = take_buffer(u);
  u.current_zero = !reused;  // a new buffer is fresh from the ledger: zero
  if (reused && (!hooks_.zero_reused || hooks_.zero_reused(u.layout->id))) {
    std::memset(b.data, 0, b.bytes());
    u.current_zero = true;
  }
  if (one_buffer_) u.total = b;
  return b;
}

BufView GradStore::round_leaf(Unit& u) {
  // Round the fp32 leaf once into a 16-bit buffer (a reused one, or a new one while the leaf is still
  // live) and free the leaf.
  const auto [b, reused] = take_buffer(u);
  if (reused && hooks_.zero_reused && !hooks_.zero_reused(u.layout->id)) {
    // Not "zeroed": the buffer's old values (a partial sum of the previous step) are added to the leaf.
    float* leaf = u.current.f32();
    const uint16_t* old = b.float16();
    for (int64_t i = 0; i < u.layout->numel; ++i)
      leaf[i] += dtype_ == DType::kBF16 ? f32_from_bf16(old[i]) : f32_from_f16(old[i]);
  }
  convert(b, u.current);
  u.leaf32.reset();
  return b;
}

void GradStore::done(int id) {
  progress();
  Unit& u = unit(id);
  SP_CHECK(u.current.data != nullptr, "done() for unit {} without a leaf", u.layout->name);
  if (hooks_.leaf_done) hooks_.leaf_done(id, u.current);
  const BufView leaf = mixed() ? round_leaf(u) : u.current;
  u.current = {};
  if (one_buffer_) {  // the leaf is the running sum (u.total) already
    if (++u.leaves == k_) sync(u);
    return;
  }
  for (const BufView& f : u.acc.push(leaf)) u.free.push_back(f);
  if (++u.leaves == k_) {
    u.total = u.acc.finish(u.free);
    sync(u);
  }
}

void GradStore::sync(Unit& u) {
  comm::ScopedPhase phase(trace_, comm::Phase::kGradSync, step_);
  const bool run = !hooks_.sync || hooks_.sync(u.layout->id, u.total);
  u.synced = true;
  if (overlap_ > 0) return start_sync(u, run);
  const int64_t t0 = now_ns();
  if (zero_ == 0) {
    if (run) dp_.all_reduce(u.total);
  } else {
    if (run)
      dp_.reduce_scatter(u.total, u.shard.view());
    else
      convert(u.shard.view(), u.total.slice(u.range.begin, u.range.size()));
  }
  spans_.push_back({u.layout->id, t0, now_ns()});
  release_full(u);
}

void GradStore::start_sync(Unit& u, bool run) {
  // Points equal on every dp rank (this unit's last done()): advance the syncs in flight, free a slot, post.
  for (InFlight& f : in_flight_) f.sync.advance();
  if (static_cast<int>(in_flight_.size()) == overlap_) retire();
  const int slot = static_cast<int>(started_++ % overlap_);  // FIFO with ≤ overlap_ in flight: slot is free
  spans_.push_back({u.layout->id, now_ns(), 0});
  PendingSync p;
  if (run)
    p = zero_ == 0 ? dp_.start_all_reduce(u.total, slot) : dp_.start_reduce_scatter(u.total, u.shard.view(), slot);
  else if (zero_ >= 1)
    convert(u.shard.view(), u.total.slice(u.range.begin, u.range.size()));
  in_flight_.push_back({&u, std::move(p), slot, spans_.size() - 1});
}

void GradStore::progress() {
  for (InFlight& f : in_flight_)
    if (spans_[f.span].end_ns == 0 && f.sync.test()) spans_[f.span].end_ns = now_ns();
}

void GradStore::retire() {
  InFlight f = std::move(in_flight_.front());
  in_flight_.pop_front();
  f.sync.wait();
  if (spans_[f.span].end_ns == 0) spans_[f.span].end_ns = now_ns();
  release_full(*f.unit);
}

void GradStore::release_full(Unit& u) {
  if (zero_ < 2) return;
  u.buffers.clear();  // frees every full-size buffer of the unit
  u.free.clear();
  u.total = {};
}

void GradStore::finish_sync() {
  if (in_flight_.empty()) return;
  comm::ScopedPhase phase(trace_, comm::Phase::kGradSync, step_);
  while (!in_flight_.empty()) retire();
}

bool GradStore::complete() const {
  if (!in_flight_.empty()) return false;
  for (const Unit& u : units_)
    if (!u.synced) return false;
  return true;
}

std::vector<ConstBufView> GradStore::owned_grads() const {
  std::vector<ConstBufView> out;
  for (const Unit& u : units_) out.push_back(zero_ == 0 ? ConstBufView(u.total) : u.shard.view());
  return out;
}

std::vector<BufView> GradStore::spent_totals() {
  SP_CHECK_EQ(zero_, 0, "spent_totals: only zero 0 keeps the full unit totals");
  std::vector<BufView> out;
  for (Unit& u : units_) {
    SP_CHECK(u.total.data != nullptr, "spent_totals: unit {} has no total this step", u.layout->name);
    out.push_back(u.total);
  }
  return out;
}

std::vector<OwnedPiece> GradStore::evidence_pieces() {
  // The synchronized gradients in place, in the gradient dtype: a 16-bit piece is widened (exactly) by
  // whoever reads it, block by block (TensorSummary::add_shard), never copied whole.
  SP_CHECK(complete(), "gradient evidence of step {} before every unit was synchronized", step_);
  std::vector<OwnedPiece> out;
  for (Unit& u : units_) {
    // zero 0: replicas, each dp rank its 1/dp range (ParamStore::evidence_pieces); else the owned shard
    const BufView g = zero_ == 0 ? u.total.slice(u.range.begin, u.range.size()) : u.shard.view();
    out.push_back({u.layout, u.range.begin, u.range.end, g.data, dtype_});
  }
  return out;
}

}  // namespace sp::parallel
