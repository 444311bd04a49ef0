// The logical tensors of one step's files, assembled from every rank's pieces (docs/formats/torch_recording.md):
// an anchor (format 1, anchors/step-S/rank-N.safetensors: the parameters before the step, the synchronized
// gradients before clipping, AdamW's two moments before the step with its step count, the parameters after it),
// a step's gradients (format 2, grads/) or a segment's first state (format 2, state/: parameters and moments).
// A sharded tensor is recorded as its pieces (metadata "shards"); the judge gathers them. Read with the engine's
// strict safetensors reader (ckpt/safetensors.h).
// Invariant: every logical tensor of every kind the file type holds is assembled from pieces that cover it
// exactly once; otherwise the files are refused naming the step, tensor, kind and piece.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "judge/recording.h"
#include "kernels/adamw.h"

namespace sp::judge {

struct AnchorTensor {
  std::vector<float> param = {}, grad = {}, exp_avg = {}, exp_avg_sq = {},
                     param_after = {};  // logical, (out, in) row-major
  int64_t optimizer_step = 0;           // AdamW's step count before this step (0: no state yet)
  std::vector<int> moment_ranks = {};   // the ranks that recorded its moments (ZeRO: the owner)
  std::vector<int> after_ranks = {};    // the ranks that recorded its parameters after the step
  std::vector<std::pair<std::optional<Shard>, int>> grad_pieces = {};  // (piece, the rank that wrote it)
};

struct AnchorState {
  int64_t step = 0;
  std::map<std::string, AnchorTensor> tensors = {};
  int64_t bytes = 0;  // of the anchor's files
  int files = 0;
};

Result<AnchorState> read_anchor(const Recording& recording, int64_t step);  // anchors/: all five kinds
Result<AnchorState> read_grads(const Recording& recording, int64_t step);   // grads/: grad
Result<AnchorState> read_state(const Recording& recording, int64_t step);   // state/: param, exp_avg, exp_avg_sq
// sqrt/ (format 2, a torch whose sqrt is not correctly rounded): per tensor, the square roots AdamW took at `step`
// that differ from the correctly rounded ones, by logical index (sorted, each index once).
using RootValues = std::map<std::string, std::vector<kernels::SqrtValue>>;
Result<RootValues> read_sqrt(const Recording& recording, int64_t step);

}  // namespace sp::judge
