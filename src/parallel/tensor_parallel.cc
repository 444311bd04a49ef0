#include "parallel/tensor_parallel.h"

#include "comm/deterministic.h"

namespace sp::parallel {

int64_t TensorParallel::staging_floats(config::Reduction mode, int tp, int64_t max_count) {
  if (mode != config::Reduction::kDeterministic || tp == 1) return 0;
  return comm::deterministic_all_reduce_scratch(max_count, tp);
}

TensorParallel::TensorParallel(comm::Communicator& tp, config::Reduction mode, MemoryLedger& ledger, int64_t max_count)
    : tp_(tp), mode_(mode) {
  const int64_t s = staging_floats(mode, tp.size(), max_count);
  if (s > 0) staging_ = Tensor(ledger, "comm.tp_staging", Category::kComm, {s});
}

void TensorParallel::sum(BufView x) {
  if (tp_.size() == 1) return;
  if (mode_ == config::Reduction::kDeterministic)
    comm::deterministic_all_reduce(tp_, x, {staging_.raw(), staging_.numel(), x.dtype});
  else
    tp_.all_reduce(x.data, x.count, x.dtype, comm::ReduceOp::kSum);
}

void TensorParallel::all_reduce_max(BufView x) {
  if (tp_.size() == 1) return;
  tp_.all_reduce(x.data, x.count, x.dtype, comm::ReduceOp::kMax);  // max is exact in any order
}

}  // namespace sp::parallel
