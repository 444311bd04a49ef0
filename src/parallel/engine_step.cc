// Engine::step (engine.h): one optimizer step of this rank, in the order of the header's five points
// (micro-batches and gradient sync, the loss, the norm and clipping, the update, the evidence), and the
// dp-replica checks that close it.
#include <cmath>
#include <cstring>

#include "core/timer.h"
#include "evidence/bubble.h"
#include "kernels/clip.h"
#include "parallel/engine.h"
#include "parallel/parameter_server.h"

namespace sp::parallel {

void Engine::run_micro_batches(PipelineRunner::StepIO& io) {
  if (!runner_) return;  // a server runs no micro-batch
  if (!replay_) {
    runner_->run(actions_, io);
    return;
  }
  // The replay: worker w's k micro-batches on its cached replica, in worker order (ssp_replay.h).
  const int64_t k = io.micro_batches / replay_->workers();
  for (int w = 0; w < replay_->workers(); ++w) {
    PipelineRunner::StepIO part = io;
    part.first_micro_batch = io.first_micro_batch + w * k;
    part.micro_batches = k;
    part.params = &replay_->replica(w);
    runner_->run(replay_actions_, part);
  }
}

double Engine::global_target_tokens(int64_t step) const {
  // The loss is the mean over every target token of the global batch, whatever the split: count
  // them from the topology-free loader (targets < 0 would be ignored tokens).
  const auto& t = plan_.config.train;
  std::vector<int32_t> buf(static_cast<size_t>(t.micro_batch_size * (t.seq_len + 1)));
  double n = 0;
  for (int64_t mb = 0; mb < plan_.micro_batches; ++mb) {
    batches_(step, mb, buf.data());
    for (int64_t b = 0; b < t.micro_batch_size; ++b)
      for (int64_t i = 1; i <= t.seq_len; ++i) n += buf[static_cast<size_t>(b * (t.seq_len + 1) + i)] >= 0 ? 1 : 0;
  }
  return n;
}

std::vector<evidence::TensorSummary> Engine::summarize(const std::vector<model::UnitPiece>& pieces, bool digest) {
  const std::vector<evidence::TensorSummary> local =
      evidence::summarize_pieces(tensors_, pieces, coords_.tp == 0, digest);
  return evidence::all_reduce_summaries(*comms_.world, local);
}

StepResult Engine::step(int64_t s, bool checksums) {
  SP_CHECK(batches_ != nullptr, "Engine::step needs a training dataset or a batch source");
  const config::RunConfig& c = plan_.config;
  Stopwatch watch;
  const TimeSplit times_before = thread_time_split();
  StepResult r;
  r.step = s;
  faults_.before_step(s);
  if (grads_) grads_->begin_step(s);
  if (timeline_) timeline_->begin_step(s);
  if (activations_) activations_->begin_step(s);

  // 1. Forward and backward of this dp rank's micro-batches, in the pipeline schedule's order. Each
  //    unit's gradient leaves are summed over the canonical tree and synchronized over dp right after
  //    the last one (GradStore). Every micro-batch's loss sum is scaled by 1 / the global batch's tokens.
  const double tokens = global_target_tokens(s);
  std::vector<double> mb_loss(static_cast<size_t>(plan_.micro_batches), 0.0);
  PipelineRunner::StepIO io;
  io.step = s;
  io.first_micro_batch = plan_.first_micro_batch(coords_.dp);
  io.micro_batches = plan_.local_micro_batches;
  io.tokens = [&](int64_t mb, int32_t* buf) { faults_.tokens(mb, io.first_micro_batch, buf, batches_); };
  io.weight_passes = [&](int64_t mb) { return faults_.weight_passes(mb, io.first_micro_batch); };
  io.loss = [&](int64_t mb, double v) {
    if (coords_.tp == 0) mb_loss[static_cast<size_t>(mb)] = v;
  };
  io.params = params_.get();
  io.grads = grads_.get();
  io.tp = tp_ops_.get();
  io.observer = activations_;
  // fp16: the per-token loss gradient carries the loss scale (a power of two: exact), removed again from
  // the norm and, through the clipping coefficient, from the update (docs/loss_scaling.md).
  const double scale = scaler_ ? scaler_->scale() : 1.0;
  io.loss_scale = faults_.loss_scale(static_cast<float>(scale / tokens));
  if (replay_) r.versions = replay_->versions();
  run_micro_batches(io);
  if (grads_) grads_->finish_sync();  // the syncs still in flight after the backward (parallel.overlap_buckets)
  if (timeline_ && grads_)
    for (const GradStore::SyncSpan& g : grads_->sync_spans())
      timeline_->record_span("grad_sync", 0, -1, g.start_ns, g.end_ns, g.unit);
  faults_.after_backward();
  update_->exchange(s);
  SP_CHECK(update_->gradients_complete(), "step {}: not every unit's gradients were synchronized", s);

  // 2. The loss: each micro-batch's sum has exactly one owner (last stage, tp rank 0 of its dp rank),
  //    so a sum over ranks adds zeros to it: exact. Then the sum in micro-batch order.
  {
    comm::ScopedPhase phase(trace_, comm::Phase::kEvidence, s);
    comms_.world->all_reduce(mb_loss.data(), static_cast<int64_t>(mb_loss.size()), DType::kF64, comm::ReduceOp::kSum);
    double sum = 0.0;
    for (double v : mb_loss) sum += v;
    r.loss = sum / tokens;
  }
  // 3. The global gradient norm from exact sums of squares (order-free, so the same on every
  //    topology), and the clipping coefficient it gives.
  {
    comm::ScopedPhase phase(trace_, comm::Phase::kOptimizer, s);
    const OwnerTimeScope timed(TimeKind::kOptimizer);
    std::vector<evidence::TensorSummary> g = summarize(update_->gradient_pieces(), checksums);
    const evidence::TensorSummary total = evidence::merge_all(g);
    r.grad_norm = total.stats.l2_norm();
    r.finite = total.stats.finite();
    if (checksums) r.grads = std::move(g);
  }
  if (scaler_) {
    // Every rank saw the same summary, so every rank agrees on the overflow and updates its scaler alike.
    r.loss_scale = scale;
    auto skip = scaler_->update(!r.finite);
    if (!skip.ok()) r.status = skip.status();
    r.grad_norm /= scale;
  }
  r.lr = schedule_.at(s);
  r.clip = kernels::clip_coefficient(r.grad_norm, c.train.grad_clip);
  // 4. AdamW on the pieces this rank owns and the distribution of the new values (the ZeRO-1/2
  //    all-gather of the updated shards, or the servers' pull). A non-finite gradient skips the update
  //    on every rank (every rank saw the same summary).
  r.skipped = !r.finite;
  {
    comm::ScopedPhase phase(trace_, comm::Phase::kOptimizer, s);
    const OwnerTimeScope timed(TimeKind::kOptimizer);
    update_->update(s, r.lr, static_cast<float>(r.clip / scale), !r.skipped, [this] { faults_.before_update(); });
  }
  // 5. Evidence: parameter checksums and the dp-replica digest check.
  {
    comm::ScopedPhase phase(trace_, comm::Phase::kEvidence, s);
    const OwnerTimeScope timed(TimeKind::kEvidence);
    if (checksums) r.params = summarize(update_->parameter_pieces(), true);
    if (c.parallel.parameter_server() && c.parallel.staleness > 0)
      r.diverging_ranks = stale_replica_check(s, r.versions);
    else
      r.diverging_ranks = replica_check();
  }
  if (replay_) replay_->after_update(s);
  if (timeline_) {
    const OwnerTimeScope timed(TimeKind::kEvidence);  // writing the step's intervals
    timeline_->end_step();
    for (const Interval& iv : timeline_->last_step())
      if (evidence::timeline_compute_kind(iv.kind))
        r.compute_seconds += static_cast<double>(iv.t1_us - iv.t0_us) * 1e-6;
  }
  // The split first, then the clock: every scope counted ended before the step's end is read.
  r.time_split = thread_time_split() - times_before;
  r.step_ns = watch.nanoseconds();
  r.seconds = static_cast<double>(r.step_ns) * 1e-9;
  return r;
}

std::vector<int> Engine::replica_check() {
  // Every rank's XXH3-128 of the parameters it holds, all-gathered over the world; ranks of one dp
  // group must agree (zero < 3: full replicas). Under ZeRO-3 replicas hold different shards by
  // design: the trace checker compares the all-gathered outputs instead.
  std::vector<int> diverging;
  const int world = comms_.world->size();
  bool any = false;
  for (int r = 0; r < world; ++r) any = any || update_->replica_of(r) >= 0;
  if (!any) return diverging;
  const Digest128 mine = params_ ? params_->replica_digest() : Digest128{};  // a server holds no replica
  std::vector<uint64_t> all(2 * static_cast<size_t>(world));
  const uint64_t send[2] = {mine.hi, mine.lo};
  const std::vector<int64_t> counts(static_cast<size_t>(world), 2);
  comms_.world->all_gather(send, all.data(), counts, DType::kU64);
  for (int r = 0; r < world; ++r) {
    const int r0 = update_->replica_of(r);
    if (r0 < 0) continue;
    if (all[2 * static_cast<size_t>(r)] != all[2 * static_cast<size_t>(r0)] ||
        all[2 * static_cast<size_t>(r) + 1] != all[2 * static_cast<size_t>(r0) + 1])
      diverging.push_back(r);
  }
  return diverging;
}

std::vector<int> Engine::stale_replica_check(int64_t step, std::vector<int64_t>& versions) {
  // SSP: workers hold different versions by design. The replica digest exchange (the same all-gather
  // of two words per rank) carries each worker's versions and a 64-bit digest instead: a worker is
  // diverging when it computed this step, or will compute the next, beyond the bound s, or when it
  // holds the version of a lower worker with other values. versions: each worker's, for the metrics.
  const int world = comms_.world->size(), W = roles_.workers();
  const int64_t s = plan_.config.parallel.staleness;
  uint64_t send[2] = {0, 0};
  if (!server_) {
    const auto& worker = static_cast<const PsWorkerUpdate&>(*update_);
    const Digest128 d = params_->replica_digest();
    const std::vector<int64_t> computed = update_->versions(step);
    SP_CHECK(computed.size() == 1 && worker.held_version() < (int64_t{1} << 32), "worker versions at step {}", step);
    send[0] = static_cast<uint64_t>(computed[0]) << 32 | static_cast<uint64_t>(worker.held_version());
    send[1] = d.hi ^ d.lo;
  }
  std::vector<uint64_t> all(2 * static_cast<size_t>(world));
  const std::vector<int64_t> counts(static_cast<size_t>(world), 2);
  comms_.world->all_gather(send, all.data(), counts, DType::kU64);
  std::vector<int> diverging;
  auto held = [&](int r) { return static_cast<int64_t>(all[2 * static_cast<size_t>(r)] & 0xffffffffu); };
  for (int r = 0; r < W; ++r) {
    const auto computed = static_cast<int64_t>(all[2 * static_cast<size_t>(r)] >> 32);
    versions.push_back(computed);
    bool bad = step - computed > s || step + 1 - held(r) > s;
    for (int r0 = 0; r0 < r && !bad; ++r0)
      if (held(r0) == held(r)) {
        bad = all[2 * static_cast<size_t>(r0) + 1] != all[2 * static_cast<size_t>(r) + 1];
        break;
      }
    if (bad) diverging.push_back(r);
  }
  return diverging;
}

}  // namespace sp::parallel
