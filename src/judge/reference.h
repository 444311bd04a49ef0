// The judge's reference: the engine at dp = tp = pp = 1 (the same code path as every training run, as
// `shardproof grads`) computing the loss and gradients of a recorded global batch — its M micro-batches in
// index order, as recorded by the ranks' token files (docs/formats/token_batch.md) — from the parameters the
// judge gives (a recorded state, an anchor's, or the replay's). One engine serves every step of a recording.
// Not the comparison (judge/context.h) and not a second model: parallel::Engine::compute_gradients.
#pragma once

#include <memory>

#include "core/status.h"
#include "judge/context.h"
#include "judge/recording.h"

namespace sp::judge {

class JudgeReference {
 public:
  // Plans the single-device run of the recording's batch shape and checks it fits in memory.
  static Result<std::unique_ptr<JudgeReference>> make(const Recording& recording);
  ~JudgeReference();
  // skip ≥ 0: that micro-batch's ids replaced by padding (the diagnosis of a missing backward).
  Result<ReferenceStep> operator()(int64_t step, const ParamsFn& params, int64_t skip);
  // Reads every step's global batch: each token file as its rank recorded it, and each micro-batch's target
  // count equal to the one recorded with its loss. Refuses (exit 2) naming the file and micro-batch.
  Status check_batches() const;

 private:
  struct State;
  explicit JudgeReference(std::unique_ptr<State> s);
  Result<std::vector<int32_t>> global_batch(int64_t step) const;
  std::unique_ptr<State> s_;
};

}  // namespace sp::judge
