#include "parallel/data_parallel.h"

#include <algorithm>
#include <cstring>

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

GradientSync::GradientSync(comm::Communicator& dp, config::Reduction mode, MemoryLedger& ledger, int64_t max_numel)
    : dp_(dp), mode_(mode) {
  const int64_t s = staging_floats(mode, dp.size(), max_numel);
  if (s > 0) staging_ = Tensor(ledger, "comm.dp_staging", Category::kComm, {s});
}

void GradientSync::all_reduce(float* data, int64_t n) {
  if (dp_.size() == 1) return;
  if (mode_ == config::Reduction::kDeterministic)
    comm::deterministic_all_reduce(dp_, data, n, staging_.f32());
  else
    dp_.all_reduce(data, n, DType::kF32, comm::ReduceOp::kSum);
}

void GradientSync::reduce_scatter(const float* full, float* shard, int64_t n) {
  if (dp_.size() == 1) {
    std::memcpy(shard, full, sizeof(float) * static_cast<size_t>(n));
    return;
  }
  const std::vector<int64_t> counts = shard_counts(n, dp_.size());
  if (mode_ == config::Reduction::kDeterministic)
    comm::deterministic_reduce_scatter(dp_, full, shard, counts, staging_.f32());
  else
    dp_.reduce_scatter(full, shard, counts, DType::kF32, comm::ReduceOp::kSum);
}

void GradientSync::all_gather(const float* shard, float* full, int64_t n) {
  if (dp_.size() == 1) {
    if (shard != full) std::memmove(full, shard, sizeof(float) * static_cast<size_t>(n));
    return;
  }
  const std::vector<int64_t> counts = shard_counts(n, dp_.size());
  dp_.all_gather(shard, full, counts, DType::kF32);
}

void GradientSync::all_reduce16(uint16_t* data, int64_t n, DType t) {
  if (dp_.size() == 1) return;
  SP_CHECK(mode_ == config::Reduction::kDeterministic, "a 16-bit sum over dp needs the deterministic reduction");
  comm::deterministic_all_reduce16(dp_, data, n, static_cast<uint16_t*>(staging_.raw()), t);
}

void GradientSync::reduce_scatter16(const uint16_t* full, uint16_t* shard, int64_t n, DType t) {
  if (dp_.size() == 1) {
    std::memcpy(shard, full, sizeof(uint16_t) * static_cast<size_t>(n));
    return;
  }
  SP_CHECK(mode_ == config::Reduction::kDeterministic, "a 16-bit sum over dp needs the deterministic reduction");
  const std::vector<int64_t> counts = shard_counts(n, dp_.size());
  comm::deterministic_reduce_scatter16(dp_, full, shard, counts, static_cast<uint16_t*>(staging_.raw()), t);
}

void GradientSync::all_gather16(const uint16_t* shard, uint16_t* full, int64_t n, DType t) {
  if (dp_.size() == 1) {
    if (shard != full) std::memmove(full, shard, sizeof(uint16_t) * static_cast<size_t>(n));
    return;
  }
  const std::vector<int64_t> counts = shard_counts(n, dp_.size());
  dp_.all_gather(shard, full, counts, t);
}

}  // namespace sp::parallel
