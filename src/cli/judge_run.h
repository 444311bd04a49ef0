// `shardproof judge` run on a recording (docs/judge.md): judge_finished on a sealed one — every view, the files
// under DIR/judge/ — and judge_follow on one still being recorded: each step judged as soon as every rank has
// recorded it (judge/replay.h StepJudge), its gradients then discarded (their SHA-256 in judge/consumed.jsonl,
// what each view read of the step in judge/steps.jsonl), and when every rank has sealed, the judgement of the
// sealed recording with those steps as they were judged. Disk stays bounded by one step's gradients.
// Not the views (judge/criteria.h) and not the reading (judge/recording.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/status.h"
#include "judge/context.h"

namespace sp::cli {

// Exit code 0 PASS, 1 FAIL, 3 UNVERIFIED; errors are refusals (exit 2). `judged`: steps judged as they came
// (null: the rows of judge/steps.jsonl for the steps whose gradients judge/consumed.jsonl says were discarded).
Result<int> judge_finished(const std::string& dir, const std::map<int64_t, judge::StepResult>* judged);
// Follows DIR until every rank has sealed (or `timeout_s` pass without a new step); keep: do not discard.
Result<int> judge_follow(const std::string& dir, bool keep, double timeout_s);

}  // namespace sp::cli
