// The judge's criteria (judge/criteria.h) by what they check, one function each; only the table in
// criteria.cc calls them. criteria_recording.cc: the recording as the recorder wrote it (its seal,
// its collectives against the model's traffic, its records against each other). criteria_declared.cc: the run
// against what it declares and what any training must hold (its data, its lr schedule). criteria.cc: the training
// it recorded against the engine's reference (loss weights, replicas, gradients, the update, the resume).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "judge/criteria.h"

namespace sp::judge::criterion {

using Row = std::pair<proof::Criterion, JudgeDetection>;

std::string ranks_text(const std::vector<int>& r);
std::string pct(double x);
proof::Criterion row(std::string name, std::string threshold, std::string evidence, bool passed = false);
std::string rank_records(int rank);

// criteria_recording.cc
Row sealed(const JudgeContext& x);
Row collectives(const JudgeContext& x);
Row traffic(const JudgeContext& x);
Row records_agree(const JudgeContext& x);
Row resume(const JudgeContext& x);

// criteria_declared.cc
Row data(const JudgeContext& x);
Row lr(const JudgeContext& x);
Row precision(const JudgeContext& x);
Row scaler(const JudgeContext& x);  // fp16 with a GradScaler only (has_grad_scaler)
bool has_grad_scaler(const RecordingContract& c);
Row rounding(const JudgeContext& x);  // bf16 autocast's probe only (has_probe)
bool has_probe(const RecordingContract& c);

}  // namespace sp::judge::criterion
