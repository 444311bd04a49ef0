// The every-step judgement of a format 2 recording (docs/judge.md §3): from the full state recorded at a
// segment's first step, each step's gradient is recomputed by the engine from the replayed parameters (the
// run's own, bit for bit) and compared with the recorded one within the foreign tolerance, and the update is
// replayed with the engine's AdamW kernel (kernels/adamw.h, in the torch arithmetic the run declared) from the
// recorded gradients, the recorded lr, each piece's clip coefficient and the declared betas, eps, weight decay
// and no-decay set — then compared bit for bit with every tensor's recorded parameter checksum. A tensor whose
// bits differ is tested against a few hypotheses, each replayed bit for bit (judge/diagnosis.h: lr × c, the
// gradient × k, decay applied against the declaration, no step); one that reproduces the recorded bits names the
// pattern and the replay continues from the run's actual state, otherwise the steps after it are unchecked until
// the next recorded state. Format 1: the same comparisons at anchors only (judge_anchors).
// Invariant: a step counts as checked only if its gradient was recomputed and its update replayed from the
// run's exact state.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "judge/context.h"

namespace sp::judge {

// The optimizer's state of every logical tensor, as the replay holds it.
struct ReplayTensor {
  std::vector<float> p = {}, m = {}, v = {};
  int64_t t = 0;  // AdamW's step count before the next step
};
using ReplayState = std::map<std::string, ReplayTensor>;

// What one tensor's update is replayed with (the recorded inputs, or a hypothesis about them).
struct UpdateInputs {
  double lr = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  kernels::AdamWArithmetic arithmetic = kernels::AdamWArithmetic::kMulAdd;
  std::vector<std::pair<std::optional<Shard>, float>> pieces = {};  // each piece's clip coefficient
  float grad_scale = 1.0f;                                          // the gradient × k before the clip (a hypothesis)
  float grad_scale_after = 1.0f;                                    // the gradient × k after the clip (a hypothesis)
  int64_t t_delta = 0;                                              // the step count off by this (a hypothesis)
  bool no_step = false;  // the optimizer did not step this tensor (a hypothesis)
  // The run's square roots where its torch's are not correctly rounded (judge/anchor.h read_sqrt), sorted by
  // logical index; each must be within 1 ulp of the correctly rounded root of the replayed exp_avg_sq.
  std::span<const kernels::SqrtValue> roots = {};
};
// p, m, v, t of `x` after AdamW with `in` on gradient `g` (logical, `shape`); false when `in` is no AdamW step (a
// step count below 1) or a recorded square root is not within 1 ulp of the correctly rounded one (its `why`).
bool replay_update(ReplayTensor& x, const std::vector<float>& g, const Shape& shape, const UpdateInputs& in,
                   std::string* why = nullptr);

// The every-step judgement one step at a time, in order: the replay's state (from the state recorded at a
// segment's first step, then replayed), the previous step's gradients (the not-zeroed pattern). `judge --follow`
// calls step() as each step's files complete.
class StepJudge {
 public:
  StepJudge(const Recording& rec, ReferenceFn reference);
  // Judges step s (its checksums assembled into `as`) into `out`; unchecked (out.unchecked says why) when the
  // run's state before it is unknown.
  Status step(const Assembly& as, int64_t s, StepResult& out);
  // The run's state is no longer known (a step judged elsewhere): the next steps are unchecked until a state.
  void forget(std::string why) { known_ = false, lost_ = std::move(why), prev_.reset(); }

 private:
  bool state_recorded(int64_t s) const;  // a state file of step s exists (each segment's first step)
  const Recording& rec_;
  ReferenceFn reference_;
  ReplayState state_ = {};
  std::map<std::string, std::vector<int>> owners_ = {};  // the ranks that recorded each tensor's moments
  bool known_ = false;
  std::string lost_ = {};  // why the replay no longer knows the run's state
  std::optional<AnchorState> prev_ = {};
  float prev_coefficient_ = 1.0f;
};

// Every step of a format 2 recording into `out` (one StepResult per step); `judged`: steps a judge following
// the run judged as they came and whose gradients it discarded (judge/steps.jsonl), taken as they are.
Status judge_every_step(const Recording& rec, const Assembly& as, const ReferenceFn& reference,
                        std::vector<StepResult>& out, const std::map<int64_t, StepResult>* judged = nullptr);
// A format 1 recording: its anchors checked as before, every other step unchecked.
Status judge_anchors(const Recording& rec, const Assembly& as, const ReferenceFn& reference,
                     std::vector<StepResult>& out);

// The loss and gradient comparison shared by both forms: the run's loss and micro-batch loss sums against the
// engine's on the same batch, each tensor's recorded gradient against the engine's, non-finite values counted.
void compare_gradients(const Recording& rec, const Assembly& as, const AnchorState& recorded, const ReferenceStep& ref,
                       StepResult& out);

}  // namespace sp::judge
