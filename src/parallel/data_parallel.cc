#include "parallel/data_parallel.h"

#include <fmt/format.h>

#include "comm/deterministic.h"

namespace sp::parallel {

std::vector<int64_t> shard_counts(int64_t n, int parts) { return comm::even_split_counts(n, parts); }

ShardRange shard_range_of(int64_t n, int parts, int index) {
  const std::vector<int64_t> c = shard_counts(n, parts);
  int64_t begin = 0;
  for (int r = 0; r < index; ++r) begin += c[static_cast<size_t>(r)];
  return {begin, begin + c[static_cast<size_t>(index)]};
}

int64_t GradientSync::staging_floats(config::Reduction mode, int dp, int64_t max_numel) {
  if (mode != config::Reduction::kDeterministic || dp == 1) return 0;
  // The all-reduce needs dp·⌈n/dp⌉; the reduce-scatter dp·counts[rank] ≤ the same.
  return comm::deterministic_all_reduce_scratch(max_numel, dp);
}

GradientSync::GradientSync(comm::Communicator& dp, config::Reduction mode, MemoryLedger& ledger, int64_t max_numel,
                           int slots)
    : dp_(dp), mode_(mode) {
  SP_CHECK_GE(slots, 1, "GradientSync needs a staging slot");
  const int64_t s = staging_floats(mode, dp.size(), max_numel);
  for (int i = 0; i < slots && s > 0; ++i)
    staging_.emplace_back(ledger, i == 0 ? std::string("comm.dp_staging") : fmt::format("comm.dp_staging.{}", i),
                          Category::kComm, Shape{s});
}

BufView GradientSync::staging(DType dtype, int slot) {
  SP_CHECK(slot >= 0 && slot < static_cast<int>(staging_.size()), "staging slot {} of {}", slot, staging_.size());
  Tensor& t = staging_[static_cast<size_t>(slot)];
  return {t.raw(), t.numel(), dtype};
}

bool PendingSync::test() {
  if (fast_) return fast_->test();
  if (det_) return det_->test();
  return true;
}

void PendingSync::advance() {
  if (det_) det_->advance();
}

void PendingSync::wait() {
  if (fast_) fast_->wait();
  if (det_) det_->wait();
}

PendingSync GradientSync::start_all_reduce(BufView data, int slot) {
  if (dp_.size() == 1) return {};
  if (mode_ == config::Reduction::kDeterministic)
    return PendingSync(comm::PendingReduction::start_all_reduce(dp_, data, staging(data.dtype, slot)));
  SP_CHECK(data.dtype == DType::kF32, "a {} sum over dp needs the deterministic reduction", dtype_name(data.dtype));
  return PendingSync(dp_.iall_reduce(data.data, data.count, data.dtype, comm::ReduceOp::kSum));
}

PendingSync GradientSync::start_reduce_scatter(ConstBufView full, BufView shard, int slot) {
  if (dp_.size() == 1) {
    convert(shard, full);
    return {};
  }
  const std::vector<int64_t> counts = shard_counts(full.count, dp_.size());
  if (mode_ == config::Reduction::kDeterministic)
    return PendingSync(
        comm::PendingReduction::start_reduce_scatter(dp_, full, shard, counts, staging(full.dtype, slot)));
  SP_CHECK(full.dtype == DType::kF32, "a {} sum over dp needs the deterministic reduction", dtype_name(full.dtype));
  SP_CHECK_EQ(shard.count, counts[static_cast<size_t>(dp_.rank())], "reduce_scatter shard on '{}'", dp_.name());
  return PendingSync(dp_.ireduce_scatter(full.data, shard.data, counts, full.dtype, comm::ReduceOp::kSum));
}

void GradientSync::all_reduce(BufView data) {
  if (dp_.size() == 1) return;
  if (mode_ == config::Reduction::kDeterministic) {
    comm::deterministic_all_reduce(dp_, data, staging(data.dtype));
  } else {
    SP_CHECK(data.dtype == DType::kF32, "a {} sum over dp needs the deterministic reduction", dtype_name(data.dtype));
    dp_.all_reduce(data.data, data.count, data.dtype, comm::ReduceOp::kSum);
  }
}

void GradientSync::reduce_scatter(ConstBufView full, BufView shard) {
  if (dp_.size() == 1) return convert(shard, full);
  const std::vector<int64_t> counts = shard_counts(full.count, dp_.size());
  if (mode_ == config::Reduction::kDeterministic) {
    comm::deterministic_reduce_scatter(dp_, full, shard, counts, staging(full.dtype));
  } else {
    SP_CHECK(full.dtype == DType::kF32, "a {} sum over dp needs the deterministic reduction", dtype_name(full.dtype));
    SP_CHECK_EQ(shard.count, counts[static_cast<size_t>(dp_.rank())], "reduce_scatter shard on '{}'", dp_.name());
    dp_.reduce_scatter(full.data, shard.data, counts, full.dtype, comm::ReduceOp::kSum);
  }
}

void GradientSync::all_gather(ConstBufView shard, BufView full) {
  SP_CHECK(shard.dtype == full.dtype, "all_gather of {} into {}", dtype_name(shard.dtype), dtype_name(full.dtype));
  if (dp_.size() == 1) return convert(full, shard);
  const std::vector<int64_t> counts = shard_counts(full.count, dp_.size());
  SP_CHECK_EQ(shard.count, counts[static_cast<size_t>(dp_.rank())], "all_gather shard on '{}'", dp_.name());
  dp_.all_gather(shard.data, full.data, counts, full.dtype);
}

}  // namespace sp::parallel
