// The recording's partial checksums merged into the engine's logical records (docs/formats/checksums.md), and
// the replica comparison they carry. A rank summarizes only its share of the replicas of its piece (the
// digest lanes add mod 2^64 and the exact sums are integers, so shares merge exactly into the record one
// device would write); every rank also records the SHA-256 of its whole local piece, and pieces held by
// several ranks (dp replicas, TP-replicated norms) must agree bit for bit.
// Not the judgement of the records (judge/criteria.h).
// Invariant: a logical record is assembled only from shares that tile the tensor exactly — each element
// summarized by exactly one rank — otherwise assembly refuses, naming the step, tensor and the gap or overlap.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.h"
#include "evidence/tensor_summary.h"
#include "judge/recording.h"

namespace sp::judge {

struct AssembledTensor {
  int64_t step = 0;
  std::string phase = {}, tensor = {};
  int64_t numel = 0;
  evidence::TensorSummary summary = {};
};

// Pieces held by several ranks that differ: the ranks departing from the majority (all of them when no
// value has a majority).
struct ReplicaMismatch {
  int64_t step = 0;
  std::string phase = {}, tensor = {}, piece = {};  // piece: "whole" or "rows 1/2"
  std::vector<int> ranks = {}, all = {};            // departing ranks; every holder
  std::string kind = {};                            // "dp replicas", "tp-replicated", "dp × tp replicas"
};

struct Assembly {
  std::vector<AssembledTensor> tensors = {};  // by step: grads then params, tensors in canonical order
  std::map<std::tuple<int64_t, std::string, std::string>, size_t> index = {};  // (step, phase, tensor) → tensors
  std::map<int64_t, double> loss = {};      // the run's global loss per step: Σ loss sums / Σ targets
  std::map<int64_t, int64_t> targets = {};  // target tokens of each step's global batch
  std::string checksums_jsonl = {};         // the engine's format, every step's loss then its tensor records
  int64_t replica_sets = 0;                 // (step, phase, tensor, piece) held by more than one rank
  int64_t replica_holders = 0;
  std::vector<ReplicaMismatch> replica_mismatches = {};  // by step, grad before param, canonical tensor order
  // step → (tensor, rank) → Σx² of the gradient piece that rank holds (whole or its shard): a rank's local norm
  // (judge/diagnosis.h norm_pattern).
  std::map<int64_t, std::map<std::pair<std::string, int>, double>> piece_squares = {};
  const AssembledTensor* find(int64_t step, const std::string& phase, const std::string& tensor) const;
};

Result<Assembly> assemble_checksums(const Recording& recording);
// One more step into `out` (a judge following the recording: the steps in order, as their records complete).
Status assemble_step(const Recording& recording, int64_t step, Assembly& out);

}  // namespace sp::judge
