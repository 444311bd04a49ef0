#include "judge/reference.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "comm/mpi_communicator.h"
#include "data/token_batch.h"
#include "parallel/engine.h"
#include "parallel/memory_fit.h"

namespace sp::judge {

struct JudgeReference::State {
  State(const Recording* r, plan::RunPlan p, comm::ProcessGrid g) : rec(r), plan(std::move(p)), grid(g) {}
  const Recording* rec = nullptr;
  plan::RunPlan plan;
  comm::ProcessGrid grid;
  comm::GridCommunicators comms;
  comm::TraceContext trace;
  MemoryLedger ledger;
  std::unique_ptr<parallel::Engine> engine;
};

JudgeReference::JudgeReference(std::unique_ptr<State> s) : s_(std::move(s)) {}
JudgeReference::~JudgeReference() = default;

Result<std::unique_ptr<JudgeReference>> JudgeReference::make(const Recording& rec) {
  config::RunConfig rc = rec.contract().single_device_config();
  // Autocast: the engine's 16-bit casts (bf16 parameters: single_device_config is bf16 already, the traffic model's
  // too). fp16: the loss scale is given per step (operator()), the engine's own scaler is not used.
  if (rec.contract().autocast_bf16) rc.train.precision.compute = DType::kBF16;
  if (rec.contract().autocast_fp16) {
    rc.train.precision.compute = DType::kF16;
    rc.fp16 = optim::LossScalerConfig{};
  }
  auto plan = plan::RunPlan::make(rc, 1);
  if (!plan.ok()) return plan.status().with_context("the single-device reference of the recorded batch");
  SP_ASSIGN_OR_RETURN(comm::ProcessGrid grid, comm::ProcessGrid::create(1, 1, 1, "tp-dp-pp", 1));
  auto s = std::make_unique<State>(&rec, *plan, grid);
  s->comms = comm::make_grid_communicators(s->grid);
  SP_RETURN_IF_ERROR(parallel::check_memory_fit(s->plan, s->grid, *s->comms.world));
  s->engine =
      std::make_unique<parallel::Engine>(s->plan, s->grid, s->comms, s->trace, s->ledger, nullptr, nullptr, nullptr);
  return std::unique_ptr<JudgeReference>(new JudgeReference(std::move(s)));
}

Result<std::vector<int32_t>> JudgeReference::global_batch(int64_t step) const {
  const Recording& rec = *s_->rec;
  const RecordingContract& c = rec.contract();
  const int64_t per = c.strategy.micro_batch_size * (c.seq_len + 1);
  std::vector<int32_t> out(static_cast<size_t>(c.micro_batches * per));
  for (const Recording::TokenPiece& p : rec.token_pieces(step)) {
    auto batch = data::read_token_batch(rec.path(p.file), c.model.model.vocab_size);
    if (!batch.ok()) return invalid_argument("recording '{}' refused: {}", rec.dir(), batch.status().message());
    const auto rows = static_cast<int64_t>(p.indices.size()) * c.strategy.micro_batch_size;
    if (batch->rows != rows || batch->cols != c.seq_len + 1)
      return invalid_argument(
          "recording '{}' refused: {} holds ({}, {}) ids; rank {} recorded {} micro-batches of ({}, {})", rec.dir(),
          p.file, batch->rows, batch->cols, p.rank, p.indices.size(), c.strategy.micro_batch_size, c.seq_len + 1);
    for (size_t j = 0; j < p.indices.size(); ++j)
      std::memcpy(out.data() + p.indices[j] * per, batch->tokens.data() + static_cast<int64_t>(j) * per,
                  sizeof(int32_t) * static_cast<size_t>(per));
  }
  return out;
}

Status JudgeReference::check_batches() const {
  const Recording& rec = *s_->rec;
  const RecordingContract& c = rec.contract();
  const int64_t T = c.seq_len, per = c.strategy.micro_batch_size * (T + 1);
  for (int64_t step = 0; step < c.steps; ++step) {
    SP_ASSIGN_OR_RETURN(const std::vector<int32_t> ids, global_batch(step));
    for (const auto& [l, rank] : rec.losses(step)) {
      int64_t targets = 0;
      for (int64_t b = 0; b < c.strategy.micro_batch_size; ++b)
        for (int64_t i = 1; i <= T; ++i) targets += ids[static_cast<size_t>(l.index * per + b * (T + 1) + i)] >= 0;
      if (targets != l.targets)
        return invalid_argument(
            "recording '{}' refused: step {} micro-batch {}: rank {} recorded {} target tokens, its "
            "recorded ids hold {}",
            rec.dir(), step, l.index, rank, l.targets, targets);
    }
  }
  return Status();
}

Result<ReferenceStep> JudgeReference::operator()(int64_t step, const ParamsFn& params, int64_t skip) {
  SP_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, global_batch(step));
  const RecordingContract& c = s_->rec->contract();
  if (skip >= 0) {
    const int64_t per = c.strategy.micro_batch_size * (c.seq_len + 1);
    std::fill(tokens.begin() + skip * per, tokens.begin() + (skip + 1) * per, -1);
  }
  parallel::Engine& e = *s_->engine;
  e.set_parameters(params);
  // fp16: the run's loss scale of this step (its backward's range), halved while the engine's gradients overflow at
  // it; a power of two, divided out exactly. Only the range differs from the run's scale, never a rounding.
  double scale = 1.0;
  if (c.grad_scaler) {
    const std::optional<ScalerRecord>& sc = s_->rec->ranks()[0].steps[static_cast<size_t>(step)].scaler;
    scale = sc ? sc->scale : c.grad_scaler->init_scale;
  }
  ReferenceStep r;
  for (int halvings = 0;; ++halvings) {
    r = ReferenceStep{};
    r.loss = e.compute_gradients(tokens.data(), &r.micro_batch_losses, scale);
    bool finite = true;
    for (const model::UnitPiece& p : e.gradient_pieces())
      for (const model::TensorSlot& t : p.unit->tensors) {
        auto& g = r.grads[t.spec.name];
        g.resize(static_cast<size_t>(t.numel));
        convert(f32_view(g.data(), t.numel), p.view().slice(t.offset, t.numel));  // 16-bit gradients: widened
        for (float& x : g) {
          finite = finite && std::isfinite(x);
          x = static_cast<float>(x / scale);
        }
      }
    if (finite || !c.grad_scaler || scale <= 1.0 || halvings >= 64) break;
    scale /= 2;
  }
  r.loss_scale = scale;
  return r;
}

}  // namespace sp::judge
