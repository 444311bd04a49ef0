// Engine (engine.h): one rank's share composed from the plan (stages, stores, tensor-parallel ops, the
// update strategy, the pipeline runner), its initialization, and the glue for checkpoints, consolidated
// weights and the ledger prediction. A step is engine_step.cc; the passes without an update engine_eval.cc.
#include "parallel/engine.h"

#include <algorithm>

#include "kernels/gemm32_auto.h"
#include "kernels/matmul.h"
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
  // A run resolved "auto" into the plan already (rank 0's pick, trainer.cc); a single-process user of the
  // engine (step_bench, grads, the judge's reference) gets this host's pick here.
  const Result<kernels::Gemm32Kind> gemm32 = kernels::resolve_gemm32(c.train.gemm32, c.parallel.blas_threads);
  SP_CHECK(gemm32.ok(), "train.gemm32: {}", gemm32.status().message());
  kernels::set_gemm32(*gemm32);
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
  actions_ = plan::schedule_actions(c.parallel.schedule, coords_.pp, c.parallel.pp, c.parallel.virtual_stages,
                                    plan_.local_micro_batches);
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
    spec.split_backward = plan::splits_backward(actions_);  // ZB-H1's ranks ≥ 1 (rank 0: full backwards)
    spec.sequence_parallel = c.parallel.sequence_parallel;
    spec.precision = precision.compute;
    spec.gemm16 = gemm16_.get();
    stages_.push_back(std::make_unique<model::LlamaStage>(c.model, spec, ledger_));
  }
  const std::vector<const model::UnitLayout*> us = units();
  int64_t max_unit = 0;
  for (const model::UnitLayout* u : us) max_unit = std::max(max_unit, u->numel);
  // Overlapped syncs each stage in their own slot (GradStore); at dp = 1 there is nothing to overlap.
  const int overlap = comms_.axis(comm::Axis::kDp).size() > 1 ? c.parallel.overlap_buckets : 0;
  dp_sync_ = std::make_unique<GradientSync>(comms_.axis(comm::Axis::kDp), c.parallel.reduction, ledger_, max_unit,
                                            std::max(1, overlap));
  tp_ops_ = std::make_unique<TensorParallel>(comms_.axis(comm::Axis::kTp), c.parallel.reduction, ledger_,
                                             c.train.micro_batch_size * c.train.seq_len * c.model.dim,
                                             c.parallel.sequence_parallel ? c.train.micro_batch_size : 0);
  params_ = std::make_unique<ParamStore>(us, c.parallel.zero, *dp_sync_, ledger_, precision.compute);
  grads_ = std::make_unique<GradStore>(us, plan_.local_micro_batches, c.parallel.zero, *dp_sync_, ledger_, trace_,
                                       precision.grad, c.parallel.reduction, overlap);
  if (roles_.parameter_server())
    update_ = std::make_unique<PsWorkerUpdate>(*params_, *grads_, *comms_.ps, roles_, plan::PsKeySpace(us, roles_),
                                               trace_, ledger_, c.parallel.staleness);
  else
    update_ = std::make_unique<AllReduceUpdate>(*params_, *grads_, adamw, ledger_, grid_, c.parallel.zero, coords_.dp);
  std::vector<PipelineRunner::Chunk> chunks;
  for (size_t j = 0; j < stages_.size(); ++j) chunks.push_back({stages_[j].get(), placements_[j]});
  runner_ = std::make_unique<PipelineRunner>(chunks, comms_.axis(comm::Axis::kPp), ledger_, trace_, timeline_);
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

plan::LedgerModelInput Engine::ledger_input() const {
  return plan::rank_ledger_input(plan_, grid_, comms_.world->rank(), eval_set_.has_value() ? eval_set_->batches() : 0);
}

plan::LedgerPrediction Engine::predicted_ledger() const {
  plan::LedgerPrediction p = plan::predict_ledger(ledger_input());
  const config::ParallelConfig& pc = plan_.config.parallel;
  if (pc.replay_workers > 0) SspReplay::add_to_prediction(p, units(), pc.replay_workers, pc.staleness);
  return p;
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
      float* dst = p.f32();
      for (int64_t x = lo; x < hi; ++x) dst[x - p.begin] = src[t.logical_index(x - t.offset)];
    }
  update_->state_loaded();
  if (replay_) replay_->reset();
}

}  // namespace sp::parallel
