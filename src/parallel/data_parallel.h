// Data-parallel gradient synchronization over the dp axis, in the two modes of docs/equivalence.md:
//   deterministic: comm/deterministic.h (all-to-all, canonical tree over dp ranks in rank order,
//                  all-gather): every rank gets the same bits, equal to the single-device sum;
//   fast:          MPI's own all-reduce / reduce-scatter (MPI's order; compared with tolerances).
// Shards (ZeRO) are contiguous ranges of a unit's flat buffer that ignore tensor boundaries: rank d
// of n owns [offset_d, offset_d + count_d) with counts from even_split_counts(numel, n).
// At dp = 1 every call is a no-op (the reduction of one leaf is the leaf).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "comm/deterministic.h"
#include "config/run_config.h"
#include "tensor/tensor.h"

namespace sp::parallel {

struct ShardRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// The counts of a flat buffer of n elements split over `parts` ranks, and the range rank `index` owns.
std::vector<int64_t> shard_counts(int64_t n, int parts);
ShardRange shard_range_of(int64_t n, int parts, int index);

// A synchronization in flight (GradientSync::start_*): test() progresses it without posting anything and says
// whether it is complete; advance() posts what remains to post (the deterministic all-reduce's all_gather,
// after waiting for its all_to_all); wait() completes it. The owner calls advance() and wait() only at points
// that are the same on every dp rank, in the same order (comm/deterministic.h: why test() never posts).
class PendingSync {
 public:
  PendingSync() = default;  // complete (dp = 1, or a sync a fault skipped)
  explicit PendingSync(std::unique_ptr<comm::Request> fast) : fast_(std::move(fast)) {}
  explicit PendingSync(std::unique_ptr<comm::PendingReduction> det) : det_(std::move(det)) {}
  bool test();
  void advance();
  void wait();

 private:
  std::unique_ptr<comm::Request> fast_;
  std::unique_ptr<comm::PendingReduction> det_;
};

class GradientSync {
 public:
  // max_numel: the largest buffer ever synchronized (sizes the staging buffers, category comm).
  // slots: syncs that may be in flight at once (start_*'s `slot` < slots); deterministic mode stages each in
  // its own buffer: "comm.dp_staging", then "comm.dp_staging.<i>" for slot i ≥ 1.
  GradientSync(comm::Communicator& dp, config::Reduction mode, MemoryLedger& ledger, int64_t max_numel, int slots = 1);

  int dp_rank() const { return dp_.rank(); }
  int dp_size() const { return dp_.size(); }
  // Every buffer is a typed view (tensor/buf_view.h): fp32, or 16-bit patterns (BF16/F16: mixed precision's
  // working weights and 16-bit gradients). 16-bit sums are deterministic only (MPI has no bf16/fp16 sum; the
  // plan refuses reduction = "fast" with 16-bit gradients) and round every tree node (kernels::add_into);
  // they use the same staging buffer as fp32 (half of it).
  // data := Σ over dp ranks, in place.
  void all_reduce(BufView data);
  // shard (shard_range_of(full.count, dp, rank).size()) := the owned range of Σ over dp ranks of full.
  void reduce_scatter(ConstBufView full, BufView shard);
  // full := concatenation of every rank's shard (the owned ranges of full.count elements).
  void all_gather(ConstBufView shard, BufView full);
  // Non-blocking twins of all_reduce and reduce_scatter (same bits, same trace ops), staged in slot `slot`.
  // The buffers stay untouched until the sync completes.
  PendingSync start_all_reduce(BufView data, int slot);
  PendingSync start_reduce_scatter(ConstBufView full, BufView shard, int slot);
  static int64_t staging_floats(config::Reduction mode, int dp, int64_t max_numel);

 private:
  comm::Communicator& dp_;
  config::Reduction mode_;
  BufView staging(DType dtype, int slot = 0);  // a staging buffer as `dtype` elements (as many as it has floats)
  std::vector<Tensor> staging_;                // slots × (staging_floats) category comm, deterministic mode only
};

}  // namespace sp::parallel
