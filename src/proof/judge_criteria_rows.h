// The judge's criteria (judge_criteria.h) by what they check, one function each; only the table in
// judge_criteria.cc calls them. judge_criteria_recording.cc: the recording as the recorder wrote it (its seal,
// its collectives against the model's traffic, its records against its anchors). judge_criteria.cc: the training
// it recorded against the engine's reference (loss weights, replicas, gradients, the update, the resume).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "proof/judge_criteria.h"

namespace sp::proof::judge_rows {

using Row = std::pair<Criterion, JudgeDetection>;

std::string ranks_text(const std::vector<int>& r);
std::string pct(double x);
Criterion row(std::string name, std::string threshold, std::string evidence, bool passed = false);
std::string rank_records(int rank);

// judge_criteria_recording.cc
Row sealed(const JudgeContext& x);
Row collectives(const JudgeContext& x);
Row traffic(const JudgeContext& x);
Row records_agree(const JudgeContext& x);

}  // namespace sp::proof::judge_rows
