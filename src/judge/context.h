// What the judge's views read, computed once from a recording (docs/judge.md): the assembled checksums and
// replica comparison, the trace check, the traffic model of the recorded layout, and per step the engine's
// single-device gradient and loss of the recorded batch and the engine's AdamW replay of the recorded update.
// Format 2 (every step): the state is known at each segment's first step; from there every step's gradient is
// recomputed from the replayed parameters and its update replayed from the recorded gradients, bit for bit
// against the recorded parameter checksums (judge/replay.h). Format 1: the same at anchors only; every other
// step is unchecked (UNVERIFIED, never PASS). The engine runs through ReferenceFn, which the CLI provides.
// Tolerances for a foreign implementation are derived, not tuned (docs/equivalence.md §7, foreign_tolerances).
// Invariant: a pure function of the recording's bytes and of what ReferenceFn computes from them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "evidence/trace_check.h"
#include "judge/anchor.h"
#include "judge/assemble.h"
#include "judge/probe.h"
#include "judge/recording.h"
#include "plan/run_plan.h"
#include "plan/traffic_model.h"

namespace sp::judge {

// The engine's single-device computation of one step's global batch (judge/reference.cc).
struct ReferenceStep {
  double loss = 0;                                       // mean over the global batch's target tokens
  std::vector<double> micro_batch_losses = {};           // Σ token losses of each micro-batch, by index
  std::map<std::string, std::vector<float>> grads = {};  // HF name → logical gradient
  double loss_scale = 1.0;                               // fp16: the scale its backward ran at (divided out)
};
// The parameters the engine starts from: HF name → logical values.
using ParamsFn = std::function<const float*(const std::string& name)>;
// `skip` ≥ 0: that micro-batch's ids replaced by padding (no target: the diagnosis of a missing backward).
using ReferenceFn = std::function<Result<ReferenceStep>(int64_t step, const ParamsFn& params, int64_t skip)>;

// docs/equivalence.md §7: u = 2^-24; R = 19·L + 6 reductions on a token's path through forward and backward,
// K the longest of them; every one may run in another order in a foreign implementation (each ≲ √K·u; the
// errors of independent reductions add in quadrature: √(R·K)·u), and RoPE's angles are rounded in fp32
// (≤ T·u). token = (√(R·K) + T)·u; loss = token; gradient = token·√N (N target tokens: one more sum);
// update = 16u (AdamW is ≤ 8 roundings per element: format 1, whose replay is not bitwise); norm: the worst case
// of the framework's fp32 sum of squares, γ_k for k ≈ n_max/L (clip_norm_tolerance, below); semantics = 2^-16
// (the backpropagated scalar is two fp32 roundings).
// Under bf16 autocast (contract precision.autocast): loss and gradient are at least the 16-bit envelope
// 2·√R₁₆·u₁₆/√3 (plan::rounding_envelope) of the R₁₆ rounding points of the engine's bf16 casts and autocast's
// together (bf16_rounding_points; docs/equivalence.md §8); rounding_points = 0 in fp32.
struct JudgeTolerances {
  double token = 0, loss = 0, grad = 0, update = 0, norm = 0, semantics = 0;
  int64_t reductions = 0, longest = 0, rounding_points = 0;
};
JudgeTolerances foreign_tolerances(const RecordingContract& contract, int64_t targets);

// The bound on a rank's clip norm against the exact norm of the logical gradient it was computed from. The run's
// framework sums squares in fp32: torch's norm kernel keeps L = `norm_lanes` accumulators (one Vectorized<float>),
// each a sequential fused multiply-add over ⌈n/L⌉ squares of one tensor's piece, then adds the lanes and the tail
// and takes the square root; clip_grad_norm_, FSDP2 and DeepSpeed then square the T tensor norms, add them and
// all-reduce over R ranks before the last square root. A recursive sum of k non-negative terms errs by at most
// γ_k = k·u/(1 − k·u) relative, whatever the order (Higham, Accuracy and Stability of Numerical Algorithms, §4.2),
// and the stages compose: the sum of squares is within γ_k for k = ⌈n_max/L⌉ + 2L + T + R + 8 (the 8: each
// tensor norm's root and square, the last root, the result's cast). |√(1 ± g) − 1| ≤ g/(1 + √(1 − g)), plus the
// last root's rounding. The error grows with the length n, not √n: torch's fp32 norm of a 24.6 M-element
// gradient errs by 1.16e-3, above the 2·√Ψ·u this judge used before (docs/judge.md §7). ∞ when g ≥ 1: no bound.
// `longest`: the most elements of one tensor (a bound on any piece's), `lanes`: contract precision.norm_lanes.
double clip_norm_tolerance(int64_t longest, int64_t tensors, int64_t ranks, int64_t lanes);
double clip_norm_tolerance(const RecordingContract& contract);  // of the contract's model, world and lanes

// The 16-bit rounding points on a token's path that the envelope counts (docs/equivalence.md §8), 0 in fp32: the
// engine's bf16 model has 13 per block + 4; Hugging Face's LLaMA under torch.autocast(bf16) adds or lacks 16 per block
// + 4 (29·L + 8 together); with FSDP2's bf16 parameters every op of the run rounds, 42 per block + 9, all counted
// whether or not the engine rounds there too (55·L + 13).
int64_t bf16_rounding_points(const RecordingContract& contract);
// Whether the declared precision computes tensor `name`'s gradient in fp32 all along: every tensor in fp32; under
// bf16 autocast the norm weights and an untied embedding (a linear's weight gradient is a bf16 product there); with
// bf16 parameters none.
bool gradient_in_fp32(const RecordingContract& contract, const std::string& name);

struct TensorError {
  std::string tensor = {};
  double rel = 0;  // ‖run − reference‖₂ / ‖reference‖₂ (update, format 2: a lower bound from the norms)
  bool bitwise = false;         // every element equal (update, format 2: the checksum record's digest)
  std::vector<int> ranks = {};  // the ranks that recorded the run's values
  int64_t nonfinite = 0;        // recorded values that are NaN or ±Inf
  // Gradients whose declared precision is fp32 (gradient_in_fp32): the nonzero finite values, and how many of them
  // are exact bf16 numbers (the low 16 bits zero). Both 0 for other tensors.
  int64_t nonzero = 0, sixteen = 0;
};
// A gradient computed in fp32 whose values are mostly bf16 numbers was rounded to 16 bits on its way (a bf16
// all-reduce or compress hook, a bf16 gradient buffer). A generic fp32 value is a bf16 number with probability
// ≈ 2^-16; even at p = 2^-8 the chance that half of n ≥ 32 values are is ≤ 2^n·p^(n/2) = 2^-3n (docs/equivalence.md
// §8): FAIL when 2·sixteen > nonzero ≥ 32.
bool sixteen_bit_values(const TensorError& e);

// One recorded step as the gradient, loss and update views see it.
struct StepResult {
  int64_t step = 0;
  bool checked = false;  // its gradient and loss recomputed and its update replayed
  // fp16: a rank's GradScaler found a non-finite gradient, so the step was skipped: its gradients are not compared
  // (the scaler row checks they hold one), its update is replayed as no step.
  bool overflow = false;
  std::string unchecked = {};  // why not (a format 1 step without an anchor, a state the replay lost)
  JudgeTolerances tol = {};
  int64_t bytes = 0;  // of the files read for it
  int files = 0;
  double loss_run = 0, loss_ref = 0, loss_rel = 0;
  int64_t worst_micro_batch = -1;  // the micro-batch whose loss sum differs most
  double worst_micro_batch_rel = 0;
  int worst_micro_batch_rank = -1;
  std::vector<TensorError> grads = {}, update = {};    // canonical order
  double coefficient = 1;                              // the clip coefficient applied (rank 0's recorded norm)
  std::vector<std::string> disagreements = {};         // tensors whose recorded values and checksum records differ
  std::string grad_pattern = {}, update_pattern = {};  // what the failing evidence fits, where it fits one
  std::vector<std::string> resume_mismatch = {};       // format 2: the state loaded here ≠ the replay's
  ProbeCheck probe = {};                               // bf16 autocast: layer 0's q_proj against its inputs
};

// A StepResult as one line of judge/steps.jsonl (judge/step_result.cc), and back: what a judge following the run
// keeps of a step whose gradients it discarded, and the report's map (each view's ratio per tensor).
nlohmann::json step_result_json(const StepResult& s);
Result<StepResult> step_result_from_json(const nlohmann::json& j, const std::string& where);

// A clip norm a rank used that is not the gradient norm of the logical model.
struct NormError {
  int64_t step = 0;
  int rank = 0;
  double recorded = 0, global = 0, rel = 0;
  std::string pattern = {};  // "equals rank 1's local norm (...)": clipped before the reduction
};

// A micro-batch whose ids equal an earlier one's (the data view): (step, index) from `rank` repeats (first_step,
// first_index) from `first_rank`; first_step == step: within one global batch.
struct DataRepeat {
  int64_t step = 0, index = 0, first_step = 0, first_index = 0;
  int rank = 0, first_rank = 0;
};

struct JudgeContext {
  // `judged`: the steps judged as they came by `judge --follow` (their gradients discarded), taken as they are.
  static Result<JudgeContext> make(const Recording& recording, const ReferenceFn& reference,
                                   const std::map<int64_t, StepResult>* judged = nullptr);
  const Recording* recording = nullptr;
  Assembly assembly;
  Result<evidence::TraceReport> trace = internal_error("not read");
  Result<plan::RunPlan> plan = internal_error("not planned");  // the declared grid as the engine plans it
  plan::RecordedLayout layout =
      {};                          // what the recorded tp split keeps whole, FSDP2's units (the traffic model's input)
  std::string unmodelled = {};     // a recorded split the traffic model cannot model: its tp cells unchecked
  std::string unmodelled_dp = {};  // FSDP2 units the traffic model cannot model: the dp group's cells unchecked
  std::set<std::string> unmodelled_dp_phases = {};  // non-empty: unmodelled_dp holds for these phases' cells only
  std::string norm_unbounded = {};          // why the clip norms were not compared (no fp32 bound for so long a tensor)
  std::string gradients_uncompared = {};    // fp16: GradScaler skipped every checked step, so no gradient compared
  std::vector<StepResult> steps = {};       // every recorded step, in order
  std::vector<NormError> norm_errors = {};  // every step with gradient checksums
  std::vector<DataRepeat> repeats = {};     // every repeated micro-batch, by step
  int64_t norm_checks = 0;
  std::vector<std::string> notes = {};
  std::vector<int64_t> unchecked_steps() const;
  // What was not compared, as the verdict says it: "traffic not compared: " unmodelled and unmodelled_dp, then
  // norm_unbounded and gradients_uncompared; "" when everything was.
  std::string unmodelled_text() const;
  std::string traffic_unmodelled() const;  // unmodelled and unmodelled_dp, "; "-joined
};

// The recorded layout as the traffic model's input, and what of it is not modelled (judge/layout.cc): fills
// layout, unmodelled and unmodelled_dp of `ctx`.
void recorded_layout(const Recording& recording, JudgeContext& ctx);

// fp16 with a GradScaler: whether some rank's scaler found a non-finite gradient at `step` (the step was skipped).
bool scaler_skipped(const Recording& recording, int64_t step);

// ‖a − b‖₂ / ‖b‖₂ in double (0 when both are zero; ∞ when only b is), and whether every element is equal.
std::pair<double, bool> relative_distance(const float* a, const float* b, size_t n);

}  // namespace sp::judge
