// What the judge's views read, computed once from a recording (docs/judge.md): the assembled checksums and
// replica comparison, the trace check, the traffic model of the declared strategy, and at every anchor the
// engine's single-device gradient and loss of the recorded batch from the recorded parameters (through
// ReferenceFn, which the CLI runs: proof/ never starts the engine) and the engine's AdamW applied to the
// recorded state. Each view is then a function of this context (judge/criteria.h).
// Tolerances for a foreign implementation are derived, not tuned (docs/equivalence.md §7, foreign_tolerances).
// Invariant: a pure function of the recording's bytes and of what ReferenceFn computes from them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "evidence/trace_check.h"
#include "judge/anchor.h"
#include "judge/assemble.h"
#include "judge/recording.h"
#include "plan/run_plan.h"

namespace sp::judge {

// The engine's single-device computation of one step's global batch (judge/reference.cc).
struct ReferenceStep {
  double loss = 0;                                       // mean over the global batch's target tokens
  std::vector<double> micro_batch_losses = {};           // Σ token losses of each micro-batch, by index
  std::map<std::string, std::vector<float>> grads = {};  // HF name → logical gradient
};
using ReferenceFn = std::function<Result<ReferenceStep>(int64_t step, const AnchorState& anchor)>;

// docs/equivalence.md §7: u = 2^-24; R = 19·L + 6 reductions on a token's path through forward and backward,
// K the longest of them; every one may run in another order in a foreign implementation (each ≲ √K·u; the
// errors of independent reductions add in quadrature: √(R·K)·u), and RoPE's angles are rounded in fp32
// (≤ T·u). token = (√(R·K) + T)·u; loss = token; gradient = token·√N (N target tokens: one more sum);
// update = 16u (AdamW is ≤ 8 roundings per element); norm = 2·√Ψ·u (Ψ squares in an unknown order);
// semantics = 2^-16 (the backpropagated scalar is two fp32 roundings of the loss sum).
struct JudgeTolerances {
  double token = 0, loss = 0, grad = 0, update = 0, norm = 0, semantics = 0;
  int64_t reductions = 0, longest = 0;
};
JudgeTolerances foreign_tolerances(const RecordingContract& contract, int64_t targets);

struct TensorError {
  std::string tensor = {};
  double rel = 0;               // ‖run − reference‖₂ / ‖reference‖₂
  bool bitwise = false;         // every element equal
  std::vector<int> ranks = {};  // the ranks that recorded the run's values
};

struct AnchorResult {
  int64_t step = 0;
  int64_t bytes = 0;
  int files = 0;
  JudgeTolerances tol = {};
  double loss_run = 0, loss_ref = 0, loss_rel = 0;
  int64_t worst_micro_batch = -1;  // the micro-batch whose loss sum differs most
  double worst_micro_batch_rel = 0;
  int worst_micro_batch_rank = -1;
  std::vector<TensorError> grads = {}, update = {};  // canonical order
  double coefficient = 1;                            // the clip coefficient applied (from the recorded norm)
  std::vector<std::string> disagreements = {};       // anchor tensors whose engine summary differs from the checksums
};

// A clip norm a rank used that is not the gradient norm of the logical model.
struct NormError {
  int64_t step = 0;
  int rank = 0;
  double recorded = 0, global = 0, rel = 0;
};

struct JudgeContext {
  static Result<JudgeContext> make(const Recording& recording, const ReferenceFn& reference);
  const Recording* recording = nullptr;
  Assembly assembly;
  Result<evidence::TraceReport> trace = internal_error("not read");
  Result<plan::RunPlan> plan = internal_error("not planned");  // the declared strategy as the engine plans it
  std::vector<AnchorResult> anchors = {};
  std::vector<NormError> norm_errors = {};  // every step with gradient checksums
  int64_t norm_checks = 0;
  std::vector<std::string> notes = {};
};

}  // namespace sp::judge
