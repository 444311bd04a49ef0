// BlockShapes: the sizes of one micro-batch's tensors on one tensor-parallel rank, as the engine allocates
// them (model/llama_stage.h) — the one place the ledger model (plan/ledger_model.cc: the bytes a run holds)
// and the planner's time model (planner/kernel_costs.cc: the bytes each kernel moves) take them from.
// Letters as docs/glossary.md: N = B·T tokens, local heads Hl = H/tp, KVl = KV/tp, Fl = F/tp, Vl = V/tp,
// Wqkv = (Hl + 2·KVl)·D, the width of the fused q/k/v projection.
#pragma once

#include <cstdint>

#include "model/llama_config.h"

namespace sp::plan {

struct BlockShapes {
  int64_t B = 0, T = 0, N = 0, C = 0, D = 0, Hl = 0, KVl = 0, Fl = 0, Vl = 0, Wqkv = 0;
};
BlockShapes block_shapes(const model::LlamaConfig& m, int tp, int64_t micro_batch_size, int64_t seq_len);
// Token rows of the residual stream, the norms' inputs and statistics and the pipeline boundary on one rank:
// Ns = N/tp under sequence parallelism (model::StageSpec::sequence_parallel), else N.
inline int64_t sp_rows(int64_t N, int tp, bool sequence_parallel) { return sequence_parallel ? N / tp : N; }

}  // namespace sp::plan
