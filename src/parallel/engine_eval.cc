// The engine's passes that apply no update (engine.h): the evaluation over the eval split (forward only,
// every rank returns the same mean) and the loss and gradients of one explicit batch (`shardproof grads`).
#include <cmath>
#include <cstring>

#include "parallel/engine.h"

namespace sp::parallel {

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

double Engine::compute_gradients(const int32_t* tokens, std::vector<double>* micro_batch_losses, double loss_scale) {
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
  io.loss_scale = static_cast<float>(loss_scale / count);
  runner_->run(actions_, io);
  grads_->finish_sync();
  comm::ScopedPhase phase(trace_, comm::Phase::kEvidence, 0);
  comms_.world->all_reduce(sums.data(), M, DType::kF64, comm::ReduceOp::kSum);
  double loss = 0.0;
  for (double v : sums) loss += v;  // in micro-batch order, as a step's loss
  if (micro_batch_losses != nullptr) *micro_batch_losses = sums;
  return loss / count;
}

}  // namespace sp::parallel
