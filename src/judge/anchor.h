// One anchor of a recording: the full logical state around step s, assembled from every rank's
// anchors/step-S/rank-N.safetensors (docs/formats/torch_recording.md §anchors): the parameters before the
// step, the synchronized gradients (before clipping), AdamW's two moments before the step with its step
// count, and the parameters after it. A sharded tensor is recorded as its pieces (metadata "shards"); the
// judge gathers them. Read with the engine's strict safetensors reader (ckpt/safetensors.h).
// Invariant: every logical tensor of every kind is assembled from pieces that cover it exactly once;
// otherwise the anchor is refused naming the step, tensor, kind and piece.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "judge/recording.h"

namespace sp::judge {

struct AnchorTensor {
  std::vector<float> param = {}, grad = {}, exp_avg = {}, exp_avg_sq = {},
                     param_after = {};  // logical, (out, in) row-major
  int64_t optimizer_step = 0;           // AdamW's step count before this step (0: no state yet)
  std::vector<int> moment_ranks = {};   // the ranks that recorded its moments (ZeRO: the owner)
  std::vector<int> after_ranks = {};    // the ranks that recorded its parameters after the step
};

struct AnchorState {
  int64_t step = 0;
  std::map<std::string, AnchorTensor> tensors = {};
  int64_t bytes = 0;  // of the anchor's files
  int files = 0;
};

Result<AnchorState> read_anchor(const Recording& recording, int64_t step);

}  // namespace sp::judge
