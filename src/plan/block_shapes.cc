#include "plan/block_shapes.h"

namespace sp::plan {

BlockShapes block_shapes(const model::LlamaConfig& m, int tp, int64_t micro_batch_size, int64_t seq_len) {
  BlockShapes s;
  s.B = micro_batch_size;
  s.T = seq_len;
  s.N = s.B * s.T;
  s.C = m.dim;
  s.D = m.head_dim();
  s.Hl = m.n_heads / tp;
  s.KVl = m.n_kv_heads / tp;
  s.Fl = m.ffn_dim / tp;
  s.Vl = m.vocab_size / tp;
  s.Wqkv = (s.Hl + 2 * s.KVl) * s.D;
  return s;
}

}  // namespace sp::plan
