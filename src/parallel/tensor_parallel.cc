#include "parallel/tensor_parallel.h"

#include <cstring>

#include "comm/deterministic.h"

namespace sp::parallel {

int64_t TensorParallel::staging_floats(config::Reduction mode, int tp, int64_t max_count, bool sequence_parallel) {
  if (tp == 1) return 0;
  if (sequence_parallel) return 2 * max_count;  // the rank-major copy (N·C) and the reduce-scatter's scratch (N·C)
  if (mode != config::Reduction::kDeterministic) return 0;
  return comm::deterministic_all_reduce_scratch(max_count, tp);
}

TensorParallel::TensorParallel(comm::Communicator& tp, config::Reduction mode, MemoryLedger& ledger, int64_t max_count,
                               int64_t sp_sequences)
    : tp_(tp), mode_(mode), sequences_(sp_sequences) {
  const int64_t s = staging_floats(mode, tp.size(), max_count, sp_sequences > 0);
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

BufView TensorParallel::staging(int64_t offset, int64_t count, DType dtype) {
  const BufView s{static_cast<char*>(staging_.raw()) + offset * dtype_size(dtype), count, dtype};
  SP_CHECK(staging_.defined() && (offset + count) * dtype_size(dtype) <= staging_.nbytes(),
           "tp staging of {} bytes for [{}, {}) {} elements", staging_.defined() ? staging_.nbytes() : 0, offset,
           offset + count, dtype_name(dtype));
  return s;
}

// Copies the segment (b, r) of `full` to or from the segment (r, b) of `major`, seg elements each.
static void permute(void* full, void* major, int64_t count, DType t, int tp, int64_t sequences, bool to_major) {
  SP_CHECK(sequences > 0 && count % (tp * sequences) == 0, "{} elements in {} sequences over tp {}", count, sequences,
           tp);
  const size_t seg = static_cast<size_t>(count / (tp * sequences)) * dtype_size(t);
  for (int64_t b = 0; b < sequences; ++b)
    for (int r = 0; r < tp; ++r) {
      char* f = static_cast<char*>(full) + static_cast<size_t>(b * tp + r) * seg;
      char* m = static_cast<char*>(major) + static_cast<size_t>(r * sequences + b) * seg;
      std::memcpy(to_major ? m : f, to_major ? f : m, seg);
    }
}

void TensorParallel::to_rank_major(BufView dst, ConstBufView src, int tp, int64_t sequences) {
  SP_CHECK(dst.count == src.count && dst.dtype == src.dtype, "rank-major copy of {} into {}", src.count, dst.count);
  permute(const_cast<void*>(src.data), dst.data, src.count, src.dtype, tp, sequences, true);
}

void TensorParallel::from_rank_major(BufView dst, ConstBufView src, int tp, int64_t sequences) {
  SP_CHECK(dst.count == src.count && dst.dtype == src.dtype, "rank-major copy of {} into {}", src.count, dst.count);
  permute(dst.data, const_cast<void*>(src.data), src.count, src.dtype, tp, sequences, false);
}

// all_gather into the staging's rank-major chunks, then each sequence's shards back in order.
void TensorParallel::gather(ConstBufView shard, BufView full) {
  const int n = tp_.size();
  SP_CHECK(full.count == n * shard.count && full.dtype == shard.dtype, "tp all-gather of {} {} into {} {}", shard.count,
           dtype_name(shard.dtype), full.count, dtype_name(full.dtype));
  SP_CHECK(n > 1 && sequences_ > 0, "sequence-parallel all-gather on a tp group of {} ({} sequences)", n, sequences_);
  const BufView major = staging(0, full.count, full.dtype);
  const std::vector<int64_t> counts(static_cast<size_t>(n), shard.count);
  tp_.all_gather(shard.data, major.data, counts, full.dtype);
  from_rank_major(full, major, n, sequences_);
}

// The full buffer in rank-major order into the staging, then the sum of chunk r lands on rank r.
void TensorParallel::scatter(ConstBufView full, BufView shard) {
  const int n = tp_.size();
  SP_CHECK(full.count == n * shard.count && full.dtype == shard.dtype, "tp reduce-scatter of {} {} into {} {}",
           full.count, dtype_name(full.dtype), shard.count, dtype_name(shard.dtype));
  SP_CHECK(n > 1 && sequences_ > 0, "sequence-parallel reduce-scatter on a tp group of {} ({} sequences)", n,
           sequences_);
  const BufView major = staging(0, full.count, full.dtype);
  to_rank_major(major, full, n, sequences_);
  const std::vector<int64_t> counts(static_cast<size_t>(n), shard.count);
  if (mode_ == config::Reduction::kDeterministic)  // the first half of deterministic_all_reduce
    comm::deterministic_reduce_scatter(tp_, major, shard, counts, staging(full.count, full.count, full.dtype));
  else
    tp_.reduce_scatter(major.data, shard.data, counts, full.dtype, comm::ReduceOp::kSum);
}

void TensorParallel::reduce_scatter_to_sp(ConstBufView full, BufView shard) {
  if (!forward_reduce_ || forward_reduce_()) return scatter(full, shard);
  // Skipped: the shard keeps this rank's own partial rows of each sequence.
  const BufView major = staging(0, full.count, full.dtype);
  to_rank_major(major, full, tp_.size(), sequences_);
  convert(shard, major.slice(rank() * shard.count, shard.count));
}

}  // namespace sp::parallel
