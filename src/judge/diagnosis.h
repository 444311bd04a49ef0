// What the failing evidence of a step fits, where it fits one pattern (docs/judge.md §3 "Diagnosis"): each
// pattern is a hypothesis about what the run did, tested against the recorded values — bit for bit for the update
// (the hypothesis replayed with the engine's AdamW must give the recorded parameter checksums), within the
// derived tolerance for gradients. A pattern is named only when its test passes; otherwise nothing is said.
// Not the views (judge/criteria.h) and not the replay (judge/replay.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "judge/replay.h"

namespace sp::judge {

// An update hypothesis: what it says, and the inputs that replay it.
struct UpdateHypothesis {
  std::string says;
  UpdateInputs in;
};
// The hypotheses for tensor `tensor` at `step`, from the recorded inputs `base`: the lr the optimizer's groups
// held, the lr of other steps (a schedule shifted or restarted), lr × c, the gradient × k before or after the
// clip, no clipping or another rank's clip norm, weight decay against the declaration, the step count off by one,
// no step.
std::vector<UpdateHypothesis> update_hypotheses(const Recording& rec, int64_t step, const std::string& tensor,
                                                const UpdateInputs& base);

// The gradient pattern of a failing step, or "": every tensor k × the engine's (a loss scaled by k), only q/k
// projections (the rotary layout), the sum of this step's and the previous step's gradients (not zeroed).
// `prev`: the previous step's recorded gradients (null at the first step of a segment), which its clip scaled by
// prev_coefficient in place.
std::string gradient_pattern(const Recording& rec, const StepResult& r, const AnchorState& recorded,
                             const ReferenceStep& ref, const AnchorState* prev, float prev_coefficient);

// A rank's clip norm that is not the logical one: "" or what it equals (this rank's local pieces only: clipped
// before the reduction over tp or pp).
std::string norm_pattern(const Recording& rec, const Assembly& as, int64_t step, int rank, double recorded,
                         double tolerance);

}  // namespace sp::judge
