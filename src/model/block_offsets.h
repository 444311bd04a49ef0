// Internal to model/: what the fp32 (llama_stage_f32.cc) and mixed-precision (llama_stage16.cc) bodies of
// LlamaStage share about a block: where its tensors sit in the unit's flat buffer (UnitLayout order: ln1,
// q, k, v, o, ln2, gate, up, down; q/k/v and gate/up adjacent) and the residual add. Not an interface.
#pragma once

#include <cstdint>

#include "core/time_split.h"
#include "model/weights.h"

namespace sp::model::stage_detail {

struct BlockOffsets {
  int64_t ln1, qkv, o, ln2, gu, down;
  explicit BlockOffsets(const UnitLayout& u)
      : ln1(u.tensor("input_layernorm.weight").offset),
        qkv(u.tensor("q_proj.weight").offset),
        o(u.tensor("o_proj.weight").offset),
        ln2(u.tensor("post_attention_layernorm.weight").offset),
        gu(u.tensor("gate_proj.weight").offset),
        down(u.tensor("down_proj.weight").offset) {}
};

// out (n) = a + b (the residual stream, fp32); out may alias a or b.
inline void add(float* out, const float* a, const float* b, int64_t n) {
  const OwnerTimeScope timed(TimeKind::kMemoryBound);
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

}  // namespace sp::model::stage_detail
