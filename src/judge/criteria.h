// The judge's gate (docs/judge.md): a second table of criteria like the proof's (criteria.h), one function per
// view of a recorded PyTorch run, each returning its gate row and what it found first (step, phase, tensor,
// ranks, how far outside its tolerance, how many tensors and steps fail, the pattern the evidence fits).
// The views, in the order a step lets them observe (their `point`):
//   1 collectives   every group's members issued the same collectives (the engine's trace checker)
//   2 traffic       bytes per step, group and phase equal the engine's traffic model of the recorded layout
//   3 data          no micro-batch repeated within a global batch (every dp rank the same data)
//   4 loss          the loss reduction equals the single-device one; the loss equals the engine's on the batch
//   5 replicas      gradients held by several ranks (dp replicas, TP-replicated norms) bitwise equal
//   6 gradients     the engine's single-device gradient of the recorded batch from the run's parameters, within
//                   the derived foreign tolerance, at every step
//   7 lr            every rank's lr and its optimizer's groups' agree, and follow the schedule declared as data
//   8 update        every rank's clip norm is the logical gradient's norm; the engine's AdamW replay of every
//                   step gives the recorded parameters bit for bit (format 1: at anchors, within 16u)
//   9 replicas      parameters held by several ranks bitwise equal after the update
//  10 resume        a resumed run loaded exactly the state it saved (and, format 2, the state the run had)
// The first divergence is the detection with the smallest (step, point); ties go to the row listed first; within
// a view it names the tensor furthest outside its tolerance. A step a view could not check (format 1 between
// anchors, a state lost) makes the verdict UNVERIFIED, never PASS.
// Adding a view is a function and a row. Invariant: the verdict is a pure function of the recording and of
// what ReferenceFn computes from it; every row says how many steps, tensors and ranks it checked.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "judge/context.h"
#include "proof/gate.h"

namespace sp::judge {

struct JudgeDetection {
  std::string view;
  int point = 0;
  bool found = false;
  int64_t step = -1;
  std::string phase = {};
  std::string tensor = {};
  std::vector<int> ranks = {};
  std::string detail = {};
  std::string evidence = {};
  double ratio = 0;             // how far outside its tolerance (∞: a bitwise view's difference, or non-finite)
  int64_t tensors_failing = 0;  // at the step (0: the view has no tensors)
  int64_t steps_failing = 0;    // of the steps it checked
  std::string pattern = {};     // what the evidence fits (judge/diagnosis.h), or ""
  nlohmann::json to_json() const;
};

struct JudgeVerdict {
  proof::Gate gate;
  std::vector<JudgeDetection> detections;  // one per view, in table order
  int first = -1;                          // index of the first divergence; −1: none
  std::vector<int64_t> unverified = {};    // steps a view that applies could not check
  std::string unmodelled = {};             // traffic cells the model could not model (JudgeContext::unmodelled)
  std::string verdict() const;             // FAIL, else UNVERIFIED if a step was not checked, else PASS
  int exit_code() const;                   // 1, 3, 0
  std::vector<std::string> notes;
  std::string title;
  nlohmann::json summary;  // strategy, steps, anchors, tolerances: for the report
  std::string first_line() const;
  nlohmann::json first_divergence_json() const;
};

struct JudgeRule {
  std::string_view name;
  std::pair<proof::Criterion, JudgeDetection> (*check)(const JudgeContext& context);
  bool (*applies)(const RecordingContract& contract) = nullptr;  // a row of some recordings only (null: of every one)
};
const std::vector<JudgeRule>& judge_criteria();

// Every row of the table on a context.
JudgeVerdict derive_judgement(const JudgeContext& context);

// The files a judgement writes under the recording's judge/ folder (but report.html): the assembled
// checksums.jsonl, gate.json, summary.md, first_divergence.json and steps.jsonl (each step's ratios to the
// tolerances, the report's map); name relative to the recording → bytes.
std::vector<std::pair<std::string, std::string>> judge_derived_files(const JudgeVerdict& verdict,
                                                                     const JudgeContext& context);

}  // namespace sp::judge
