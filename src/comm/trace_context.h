// TraceContext: where a rank is in training (phase, step, micro-batch), stamped on every trace record.
// It is not global: the training loop owns one per rank and hands it to its TracedCommunicators.
// Invariant: ScopedPhase restores the previous context on exit, so nested scopes compose.
// Reference: docs/formats/trace.md (fields phase, step, micro_batch).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace sp::comm {

// kPush / kPull: a parameter-server worker sending its gradients to the servers, and the servers'
// updated parameters coming back (docs/ps.md); appended so that the earlier values keep their numbers.
// kUnknown: an op whose phase its source did not record (a trace converted from PyTorch's Flight Recorder dump,
// python/shardproof_torch/flight_recorder.py); the engine never writes it.
enum class Phase {
  kSetup,
  kForward,
  kBackward,
  kGradSync,
  kOptimizer,
  kCheckpoint,
  kEval,
  kEvidence,
  kPush,
  kPull,
  kUnknown
};
std::string_view phase_name(Phase phase);  // "setup", "forward", ..., "evidence"
std::optional<Phase> phase_from_name(std::string_view name);

class TraceContext {
 public:
  Phase phase() const { return phase_; }
  int64_t step() const { return step_; }                // −1 outside a training step
  int64_t micro_batch() const { return micro_batch_; }  // −1 when not applicable
  void set(Phase phase, int64_t step, int64_t micro_batch = -1) {
    phase_ = phase;
    step_ = step;
    micro_batch_ = micro_batch;
  }

 private:
  Phase phase_ = Phase::kSetup;
  int64_t step_ = -1;
  int64_t micro_batch_ = -1;
};

// `ScopedPhase guard(ctx, Phase::kBackward, step, mb);` sets the context for the scope's lifetime.
class ScopedPhase {
 public:
  ScopedPhase(TraceContext& ctx, Phase phase, int64_t step, int64_t micro_batch = -1) : ctx_(ctx), saved_(ctx) {
    ctx_.set(phase, step, micro_batch);
  }
  ~ScopedPhase() { ctx_ = saved_; }
  ScopedPhase(const ScopedPhase&) = delete;
  ScopedPhase& operator=(const ScopedPhase&) = delete;

 private:
  TraceContext& ctx_;
  TraceContext saved_;
};

}  // namespace sp::comm
