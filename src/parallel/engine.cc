#include "parallel/engine.h"

#include <cmath>
#include <cstring>

#include "comm/staleness.h"
#include "core/log.h"
#include "core/timer.h"
#include "kernels/clip.h"
#include "kernels/matmul.h"
#include "parallel/memory_fit.h"
#include "parallel/parameter_server.h"

namespace sp::parallel {

Engine::Engine(const plan::RunPlan& plan, const comm::ProcessGrid& grid, comm::GridCommunicators& comms,
               comm::TraceContext& trace, MemoryLedger& ledger, const data::TokenDataset* train,
               const data::TokenDataset* eval, Timeline* timeline)
    : plan_(plan),
      grid_(grid),
      comms_(comms),
      trace_(trace),
      ledger_(ledger),
      train_(train),
      eval_(eval),
      timeline_(timeline),
      roles_(plan.roles()),
      tensors_(plan.config.model) {
  const config::RunConfig& c = plan_.config;
  const int rank = comms_.world->rank();
  server_ = roles_.is_server(rank);
  if (!server_) coords_ = grid_.coords_of(rank);
  kernels::set_blas_threads(c.parallel.blas_threads);
  comm::ScopedPhase phase(trace_, comm::Phase::kSetup, -1);
  const optim::AdamWConfig adamw{c.train.beta1, c.train.beta2, c.train.eps, c.train.weight_decay};
  if (train_ != nullptr) {
    loader_.emplace(*train_,
                    data::LoaderSpec{c.train.micro_batch_size, c.train.seq_len, plan_.micro_batches, c.train.seed});
    batches_ = [this](int64_t s, int64_t mb, int32_t* buf) { loader_->micro_batch(s, mb, buf); };
  }
  if (eval_ != nullptr && c.train.eval_batches > 0)  // a server evaluates nothing but joins the sum
    eval_set_.emplace(*eval_, c.train.micro_batch_size, c.train.seq_len, c.train.eval_batches);
  schedule_ = c.train.schedule();
  if (c.fp16) scaler_.emplace(*c.fp16);
  if (server_) {
    // A parameter server: its pieces of the key space, no model stage (parameter_server.h).
    SP_CHECK(comms_.ps != nullptr, "a parameter-server run needs the ps communicator");
    server_units_ = plan::ps_unit_layouts(c.model);
    update_ = std::make_unique<PsServerUpdate>(server_units_, *comms_.ps, roles_, roles_.server_index(rank), adamw,
                                               trace_, ledger_);
    return;
  }

  const model::Precision precision = c.train.precision;
  if (precision.mixed()) {
    auto g = kernels::make_gemm16(plan_.gemm16, precision.compute);
    SP_CHECK(g.ok(), "the planned 16-bit GEMM backend: {}", g.status().message());
    gemm16_ = std::move(g).value();
  }
  placements_ = plan_.chunks_of(coords_.pp);
  for (const plan::ChunkPlacement& pl : placements_) {
    model::StageSpec spec;
    spec.layer_begin = pl.layer_begin;
    spec.layer_end = pl.layer_end;
    spec.first = pl.first;
    spec.last = pl.last;
    spec.tp_rank = coords_.tp;
    spec.tp_size = c.parallel.tp;
    spec.micro_batch_size = c.train.micro_batch_size;
    spec.seq_len = c.train.seq_len;
    spec.recompute = c.train.recompute;
    spec.precision = precision.compute;
    spec.gemm16 = gemm16_.get();
    stages_.push_back(std::make_unique<model::LlamaStage>(c.model, spec, ledger_));
  }
  const std::vector<const model::UnitLayout*> us = units();
  int64_t max_unit = 0;
  for (const model::UnitLayout* u : us) max_unit = std::max(max_unit, u->numel);
  dp_sync_ = std::make_unique<GradientSync>(comms_.axis(comm::Axis::kDp), c.parallel.reduction, ledger_, max_unit);
  tp_ops_ = std::make_unique<TensorParallel>(comms_.axis(comm::Axis::kTp), c.parallel.reduction, ledger_,
                                             c.train.micro_batch_size * c.train.seq_len * c.model.dim);
  params_ = std::make_unique<ParamStore>(us, c.parallel.zero, *dp_sync_, ledger_, precision.compute);
  grads_ = std::make_unique<GradStore>(us, plan_.local_micro_batches, c.parallel.zero, *dp_sync_, ledger_, trace_,
                                       precision.grad);
  if (roles_.parameter_server())
    update_ = std::make_unique<PsWorkerUpdate>(*params_, *grads_, *comms_.ps, roles_, plan::PsKeySpace(us, roles_),
                                               trace_, ledger_, c.parallel.staleness);
  else
    update_ = std::make_unique<AllReduceUpdate>(*params_, *grads_, adamw, ledger_, grid_, c.parallel.zero, coords_.dp);
  std::vector<PipelineRunner::Chunk> chunks;
  for (size_t j = 0; j < stages_.size(); ++j) chunks.push_back({stages_[j].get(), placements_[j]});
  runner_ = std::make_unique<PipelineRunner>(chunks, comms_.axis(comm::Axis::kPp), ledger_, trace_, timeline_);
  actions_ = plan::schedule_actions(c.parallel.schedule, coords_.pp, c.parallel.pp, c.parallel.virtual_stages,
                                    plan_.local_micro_batches);
  if (const int W = c.parallel.replay_workers; W > 0) {
    replay_ = std::make_unique<SspReplay>(us, *params_, W, c.parallel.staleness, ledger_);
    replay_actions_ = plan::schedule_actions(c.parallel.schedule, 0, 1, 1, plan_.local_micro_batches / W);
  }
}

Engine::~Engine() = default;

void Engine::set_fault(const evidence::FaultSpec& fault) {
  const config::RunConfig& c = plan_.config;
  faults_.arm(fault, {.grads = grads_.get(),
                      .params = params_.get(),
                      .tp = tp_ops_.get(),
                      .world = comms_.world.get(),
                      .trace = &trace_,
                      .units = units(),
                      .coords = coords_,
                      .pp_size = c.parallel.pp,
                      .train = train_,
                      .loader = {c.train.micro_batch_size, c.train.seq_len, plan_.micro_batches, c.train.seed},
                      .micro_batch_tokens = c.train.micro_batch_size * c.train.seq_len,
                      .update = update_.get(),
                      .workers = roles_.workers(),
                      .mixed_precision = c.train.precision.mixed()});
}

std::vector<const model::UnitLayout*> Engine::units() const {
  std::vector<const model::UnitLayout*> out;
  for (const model::UnitLayout& u : server_units_) out.push_back(&u);
  for (const auto& s : stages_)
    for (int id : s->unit_ids()) out.push_back(&s->layout(id));
  return out;
}

void Engine::initialize() {
  const config::RunConfig& c = plan_.config;
  if (server_)
    static_cast<PsServerUpdate&>(*update_).initialize(c.train.seed, c.model.init_std);
  else
    params_->initialize(c.train.seed, c.model.init_std);
  if (replay_) replay_->reset();
}

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
    update_->update(s, r.lr, static_cast<float>(r.clip / scale), !r.skipped, [this] { faults_.before_update(); });
  }
  // 5. Evidence: parameter checksums and the dp-replica digest check.
  {
    comm::ScopedPhase phase(trace_, comm::Phase::kEvidence, s);
    if (checksums) r.params = summarize(update_->parameter_pieces(), true);
    if (c.parallel.parameter_server() && c.parallel.staleness > 0)
      r.diverging_ranks = stale_replica_check(s, r.versions);
    else
      r.diverging_ranks = replica_check();
  }
  if (replay_) replay_->after_update(s);
  if (timeline_) {
    timeline_->end_step();
    for (const Interval& iv : timeline_->last_step())
      if (iv.kind == "forward" || iv.kind == "backward")
        r.compute_seconds += static_cast<double>(iv.t1_us - iv.t0_us) * 1e-6;
  }
  r.seconds = watch.seconds();
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

std::vector<int64_t> Engine::eval_batches_of_this_rank() const {
  // dp rank d evaluates batches d, d + dp, ...; every batch's loss sum has one owner.
  std::vector<int64_t> mine;
  if (!eval_set_.has_value() || server_) return mine;
  for (int64_t i = coords_.dp; i < eval_set_->batches(); i += plan_.config.parallel.dp) mine.push_back(i);
  return mine;
}

std::vector<plan::PipeAction> Engine::eval_actions(int64_t batches) const {
  const config::RunConfig& c = plan_.config;
  std::vector<plan::PipeAction> fwd;
  if (batches == 0) return fwd;
  for (const plan::PipeAction& a :
       plan::schedule_actions(c.parallel.schedule, coords_.pp, c.parallel.pp, c.parallel.virtual_stages, batches))
    if (a.forward) fwd.push_back(a);
  return fwd;
}

plan::LedgerModelInput Engine::ledger_input() const {
  return plan::rank_ledger_input(plan_, grid_, comms_.world->rank(), eval_set_.has_value() ? eval_set_->batches() : 0);
}

plan::LedgerPrediction Engine::predicted_ledger() const {
  plan::LedgerPrediction p = plan::predict_ledger(ledger_input());
  const config::ParallelConfig& pc = plan_.config.parallel;
  if (pc.replay_workers > 0) SspReplay::add_to_prediction(p, units(), pc.replay_workers, pc.staleness);
  return p;
}

double Engine::evaluate(int64_t s) {
  if (!eval_set_.has_value()) return std::nan("");
  const config::RunConfig& c = plan_.config;
  const int64_t E = eval_set_->batches();
  std::vector<double> sums(static_cast<size_t>(E), 0.0);
  // Who evaluates what on which parameters: dp rank d evaluates batches d, d + dp, ... on its replica;
  // the replay evaluates them as its worker w would, batches w, w + W, ... on w's cache.
  auto run = [&](const std::vector<int64_t>& mine, model::ParamSource* params) {
    if (mine.empty()) return;
    const std::vector<plan::PipeAction> fwd = eval_actions(static_cast<int64_t>(mine.size()));
    PipelineRunner::StepIO io;
    io.step = s;
    io.first_micro_batch = 0;
    io.micro_batches = static_cast<int64_t>(mine.size());
    io.tokens = [&](int64_t local, int32_t* buf) { eval_set_->batch(mine[static_cast<size_t>(local)], buf); };
    io.loss = [&](int64_t local, double v) {
      if (coords_.tp == 0) sums[static_cast<size_t>(mine[static_cast<size_t>(local)])] = v;
    };
    io.params = params;
    io.tp = tp_ops_.get();
    io.forward_phase = comm::Phase::kEval;
    runner_->run(fwd, io);
  };
  if (replay_) {
    for (int w = 0; w < replay_->workers(); ++w) {
      std::vector<int64_t> mine;
      for (int64_t i = w; i < E; i += replay_->workers()) mine.push_back(i);
      run(mine, &replay_->replica(w));
    }
  } else {
    run(eval_batches_of_this_rank(), params_.get());
  }
  comm::ScopedPhase phase(trace_, comm::Phase::kEval, s);
  comms_.world->all_reduce(sums.data(), E, DType::kF64, comm::ReduceOp::kSum);
  double total = 0.0;
  for (double v : sums) total += v;
  return total / static_cast<double>(E * c.train.micro_batch_size * c.train.seq_len);
}

void Engine::state_loaded() {
  comm::ScopedPhase phase(trace_, comm::Phase::kCheckpoint, -1);
  update_->state_loaded();
  if (replay_) replay_->reset();
}

nlohmann::json Engine::loader_cursor(int64_t next_step) const {
  return loader_.has_value() ? loader_->cursor(next_step) : nlohmann::json{{"next_step", next_step}};
}

Result<int64_t> Engine::restore_loader(const nlohmann::json& cursor) const {
  if (!loader_.has_value()) return failed_precondition("no training data to restore a cursor for");
  return loader_->restore(cursor);
}

void Engine::set_parameters(const std::function<const float*(const std::string& name)>& logical) {
  for (const model::UnitPiece& p : update_->owned_parameters())
    for (const model::TensorSlot& t : p.unit->tensors) {
      const int64_t lo = std::max(p.begin, t.offset), hi = std::min(p.end, t.offset + t.numel);
      if (lo >= hi) continue;
      const float* src = logical(t.spec.name);
      SP_CHECK(src != nullptr, "no values for tensor '{}'", t.spec.name);
      for (int64_t x = lo; x < hi; ++x) p.data[x - p.begin] = src[t.logical_index(x - t.offset)];
    }
  update_->state_loaded();
  if (replay_) replay_->reset();
}

double Engine::compute_gradients(const int32_t* tokens, std::vector<double>* micro_batch_losses) {
  const config::RunConfig& c = plan_.config;
  SP_CHECK(c.parallel.dp == 1, "compute_gradients needs dp = 1");
  const int64_t B = c.train.micro_batch_size, T = c.train.seq_len, M = plan_.micro_batches;
  double count = 0;
  for (int64_t b = 0; b < M * B; ++b)
    for (int64_t i = 1; i <= T; ++i) count += tokens[b * (T + 1) + i] >= 0 ? 1 : 0;
  SP_CHECK(count > 0, "compute_gradients: the batch has no target token (callers refuse such a batch)");
  grads_->begin_step(0);
  std::vector<double> sums(static_cast<size_t>(M), 0.0);
  PipelineRunner::StepIO io;
  io.step = 0;
  io.first_micro_batch = 0;
  io.micro_batches = M;
  io.tokens = [&](int64_t i, int32_t* buf) {
    std::memcpy(buf, tokens + i * B * (T + 1), sizeof(int32_t) * static_cast<size_t>(B * (T + 1)));
  };
  io.loss = [&](int64_t i, double v) {
    if (coords_.tp == 0) sums[static_cast<size_t>(i)] = v;
  };
  io.params = params_.get();
  io.grads = grads_.get();
  io.tp = tp_ops_.get();
  io.loss_scale = static_cast<float>(1.0 / count);
  runner_->run(actions_, io);
  comm::ScopedPhase phase(trace_, comm::Phase::kEvidence, 0);
  comms_.world->all_reduce(sums.data(), M, DType::kF64, comm::ReduceOp::kSum);
  double loss = 0.0;
  for (double v : sums) loss += v;  // in micro-batch order, as a step's loss
  if (micro_batch_losses != nullptr) *micro_batch_losses = sums;
  return loss / count;
}

}  // namespace sp::parallel
