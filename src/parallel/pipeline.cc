#include "parallel/pipeline.h"

#include <algorithm>
#include <cstring>

#include "core/timer.h"

namespace sp::parallel {
namespace {

// The GradSink a faulty W pass sees (zb-drop-w, zb-repeat-w): each leaf reaches the real sink's done() once,
// zeroed (`zero`: the W pass dropped) or, while `hold` is set, not yet (the first of two W passes).
class FaultyWeightSink final : public model::GradSink {
 public:
  explicit FaultyWeightSink(model::GradSink& real) : real_(real) {}
  BufView leaf(int unit) override { return real_.leaf(unit); }
  void done(int unit) override {
    if (hold) return;
    if (zero) {
      const BufView l = real_.leaf(unit);
      std::memset(l.data, 0, l.bytes());
    }
    real_.done(unit);
  }
  bool zero = false, hold = false;

 private:
  model::GradSink& real_;
};

}  // namespace

PipelineRunner::PipelineRunner(std::vector<Chunk> chunks, comm::Communicator& pp, MemoryLedger& ledger,
                               comm::TraceContext& trace, Timeline* timeline)
    : pp_(pp), ledger_(ledger), trace_(trace), timeline_(timeline) {
  SP_CHECK(!chunks.empty(), "a pipeline rank needs at least one chunk");
  for (Chunk& c : chunks) {
    ChunkState s;
    s.chunk = c;
    chunks_.push_back(std::move(s));
  }
  const auto& spec = chunks_.front().chunk.stage->spec();
  tokens_ = Tensor(ledger, "io.tokens", Category::kIo, {spec.micro_batch_size, spec.seq_len + 1}, DType::kI32);
}

PipelineRunner::~PipelineRunner() {
  for (ChunkState& c : chunks_) {
    c.pending_out.clear();  // Request destructors wait
    c.pending_grad.reset();
  }
}

std::vector<int64_t> PipelineRunner::slots_allocated() const {
  std::vector<int64_t> out;
  for (const ChunkState& c : chunks_) out.push_back(static_cast<int64_t>(c.slots.size()));
  return out;
}

int PipelineRunner::tag(int chunk, int direction, int64_t mb, int64_t m) const {
  return static_cast<int>(((static_cast<int64_t>(chunk) * 2 + direction) * m + mb) % (comm::kMaxTag + 1));
}

void PipelineRunner::run(const std::vector<plan::PipeAction>& actions, const StepIO& io) {
  for (const plan::PipeAction& a : actions) {
    ChunkState& c = chunks_[static_cast<size_t>(a.virtual_stage)];
    if (a.forward)
      forward(c, a.micro_batch, io);
    else if (io.grads != nullptr && a.weight())
      weight(c, a.micro_batch, io);
    else if (io.grads != nullptr)
      backward(c, a.micro_batch, a.pass == plan::BackwardPass::kInput, io);
  }
  for (ChunkState& c : chunks_) {
    if (io.grads == nullptr) {
      for (auto& [slot, req] : c.pending_out) req->wait();
      c.pending_out.clear();
    }
    if (c.pending_grad) c.pending_grad->wait();
    c.pending_grad.reset();
  }
}

void PipelineRunner::forward(ChunkState& c, int64_t mb, const StepIO& io) {
  model::LlamaStage& stage = *c.chunk.stage;
  const plan::ChunkPlacement& pl = c.chunk.placement;
  const int64_t global_mb = io.first_micro_batch + mb;
  model::ActivationSlot* slot;
  if (c.free.empty()) {
    c.slots.push_back(stage.make_slot(next_slot_index_++));
    slot = c.slots.back().get();
  } else {
    slot = c.free.back();
    c.free.pop_back();
    auto it = c.pending_out.find(slot);
    if (it != c.pending_out.end()) {
      it->second->wait();
      c.pending_out.erase(it);
    }
  }
  slot->micro_batch = global_mb;
  c.busy[mb] = slot;
  const bool split = stage.spec().split_backward;
  if (split) stage.attach_forward_set(*slot);  // what only F → B reads, res[0] included: before the receive
  if (pl.first || pl.last) {
    io.tokens(global_mb, static_cast<int32_t*>(tokens_.raw()));
    stage.load_tokens(*slot, static_cast<const int32_t*>(tokens_.raw()));
  }
  comm::ScopedPhase phase(trace_, io.forward_phase, io.step, global_mb);
  const int pp = pp_.size();
  const int64_t n = stage.boundary_floats();  // (Ns, C): the token shard under sequence parallelism
  if (!pl.first) {                            // recv_forward
    const int64_t t0 = now_ns();
    pp_.recv(slot->input(), n, DType::kF32, (pl.pp_rank - 1 + pp) % pp, tag(pl.chunk - 1, 0, mb, io.micro_batches));
    if (timeline_) timeline_->record("recv", pl.virtual_stage, global_mb, t0);
  }
  const int64_t t0 = now_ns();
  const double loss = stage.forward(*slot, *io.params, *io.tp, io.observer);
  if (timeline_) timeline_->record("forward", pl.virtual_stage, global_mb, t0);
  if (pl.last && io.loss) io.loss(global_mb, loss);
  if (!pl.last) {  // send_forward
    const int64_t t1 = now_ns();
    c.pending_out[slot] =
        pp_.isend(slot->output(), n, DType::kF32, (pl.pp_rank + 1) % pp, tag(pl.chunk, 0, mb, io.micro_batches));
    if (timeline_) timeline_->record("send", pl.virtual_stage, global_mb, t1);
  }
  if (io.grads == nullptr) {  // forward only: the slot is done once its output is sent
    if (split) stage.release_forward_set(*slot);
    c.busy.erase(mb);
    c.free.push_back(slot);
  }
}

void PipelineRunner::backward(ChunkState& c, int64_t mb, bool input_only, const StepIO& io) {
  model::LlamaStage& stage = *c.chunk.stage;
  const plan::ChunkPlacement& pl = c.chunk.placement;
  const int64_t global_mb = io.first_micro_batch + mb;
  auto it = c.busy.find(mb);
  SP_CHECK(it != c.busy.end(), "backward of micro-batch {} before its forward on chunk {}", global_mb, pl.chunk);
  model::ActivationSlot* slot = it->second;
  comm::ScopedPhase phase(trace_, comm::Phase::kBackward, io.step, global_mb);
  const int pp = pp_.size();
  const int64_t n = stage.boundary_floats();  // (Ns, C): the token shard under sequence parallelism
  if (c.pending_grad) {                       // the gradient scratch is about to be rewritten
    const int64_t t0 = now_ns();
    c.pending_grad->wait();
    c.pending_grad.reset();
    if (timeline_) timeline_->record("wait", pl.virtual_stage, global_mb, t0);
  }
  if (!pl.last) {  // recv_backward
    const int64_t t0 = now_ns();
    pp_.recv(stage.grad_output(), n, DType::kF32, (pl.pp_rank + 1) % pp, tag(pl.chunk, 1, mb, io.micro_batches));
    if (timeline_) timeline_->record("recv", pl.virtual_stage, global_mb, t0);
  }
  if (input_only) {  // B keeps dL/d(output) in the slot's output: its forward isend must be complete
    auto out = c.pending_out.find(slot);
    if (out != c.pending_out.end()) {
      out->second->wait();
      c.pending_out.erase(out);
    }
  }
  const int64_t t0 = now_ns();
  if (input_only)
    stage.backward_input(*slot, *io.params, *io.grads, *io.tp, io.loss_scale);
  else
    stage.backward(*slot, *io.params, *io.grads, *io.tp, io.loss_scale);
  if (timeline_) timeline_->record(input_only ? "backward_input" : "backward", pl.virtual_stage, global_mb, t0);
  if (!pl.first) {  // send_backward
    const int64_t t1 = now_ns();
    c.pending_grad = pp_.isend(stage.grad_input(), n, DType::kF32, (pl.pp_rank - 1 + pp) % pp,
                               tag(pl.chunk - 1, 1, mb, io.micro_batches));
    if (timeline_) timeline_->record("send", pl.virtual_stage, global_mb, t1);
  }
  if (input_only) {  // the slot is busy until its W; what only F → B read goes back to the pool
    stage.release_forward_set(*slot);
    return;
  }
  c.busy.erase(it);
  c.free.push_back(slot);  // its forward isend (if any) is waited for before reuse
}

void PipelineRunner::weight(ChunkState& c, int64_t mb, const StepIO& io) {
  const int64_t global_mb = io.first_micro_batch + mb;
  auto it = c.busy.find(mb);
  SP_CHECK(it != c.busy.end(), "W pass of micro-batch {} before its forward on chunk {}", global_mb,
           c.chunk.placement.chunk);
  comm::ScopedPhase phase(trace_, comm::Phase::kBackward, io.step, global_mb);
  const int64_t t0 = now_ns();
  const int passes = io.weight_passes ? io.weight_passes(global_mb) : 1;
  if (passes == 1) {
    c.chunk.stage->backward_weight(*it->second, *io.grads);
  } else {  // a fault: the W pass dropped (its leaves zeroed) or run twice into the same leaves
    FaultyWeightSink sink(*io.grads);
    sink.zero = passes == 0;
    for (int i = 0; i < std::max(passes, 1); ++i) {
      sink.hold = i + 1 < passes;
      c.chunk.stage->backward_weight(*it->second, sink);
    }
  }
  if (timeline_) timeline_->record("backward_weight", c.chunk.placement.virtual_stage, global_mb, t0);
  c.free.push_back(it->second);
  c.busy.erase(it);
}

}  // namespace sp::parallel
