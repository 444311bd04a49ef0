// The judge's gate (docs/judge.md): a second table of criteria like the proof's (criteria.h), one function per
// view of a recorded PyTorch run, each returning its gate row and what it found first (step, phase, tensor,
// ranks). The views, in the order a step lets them observe (their `point`):
//   1 collectives   every group's members issued the same collectives (the engine's trace checker)
//   2 traffic       bytes per step, group and phase equal the engine's traffic model of the declared strategy
//   3 loss          the loss reduction equals the single-device one (every step); the loss equals the
//                   engine's on the same batch (anchors)
//   4 replicas      gradients held by several ranks (dp replicas, TP-replicated norms) bitwise equal
//   5 gradients     anchored: the engine's single-device gradient of the recorded batch from the recorded
//                   parameters, within the derived foreign tolerance
//   6 update        every rank's clip norm is the logical gradient's norm (every checksum step); anchored: the
//                   engine's AdamW on the recorded state gives the recorded parameters after the step
//   7 replicas      parameters held by several ranks bitwise equal after the update
//   8 resume        a resumed run loaded exactly the state it saved
// The first divergence is the detection with the smallest (step, point); ties go to the row listed first.
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
  nlohmann::json to_json() const;
};

struct JudgeVerdict {
  proof::Gate gate;
  std::vector<JudgeDetection> detections;  // one per view, in table order
  int first = -1;                          // index of the first divergence; −1: none
  std::vector<std::string> notes;
  std::string title;
  nlohmann::json summary;  // strategy, steps, anchors, tolerances: for the report
  std::string first_line() const;
  nlohmann::json first_divergence_json() const;
};

struct JudgeRule {
  std::string_view name;
  std::pair<proof::Criterion, JudgeDetection> (*check)(const JudgeContext& context);
};
const std::vector<JudgeRule>& judge_criteria();

// Every row of the table on a context.
JudgeVerdict derive_judgement(const JudgeContext& context);

// The files a judgement writes into the recording (kJudgeDerivedFiles but report.html): the assembled
// checksums.jsonl, gate.json, summary.md, first_divergence.json; relative name → bytes.
std::vector<std::pair<std::string, std::string>> judge_derived_files(const JudgeVerdict& verdict,
                                                                     const JudgeContext& context);

}  // namespace sp::judge
