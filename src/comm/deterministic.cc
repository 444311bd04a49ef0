#include "comm/deterministic.h"

#include <cstring>
#include <type_traits>

#include "core/check.h"
#include "kernels/reduce.h"

namespace sp::comm {

std::vector<int64_t> even_split_counts(int64_t total, int parts) {
  SP_CHECK(total >= 0 && parts >= 1, "cannot split {} elements into {} parts", total, parts);
  std::vector<int64_t> counts(static_cast<size_t>(parts), total / parts);
  for (int64_t r = 0; r < total % parts; ++r) ++counts[static_cast<size_t>(r)];
  return counts;
}

int64_t deterministic_reduce_scatter_scratch(std::span<const int64_t> counts, int rank) {
  SP_CHECK(rank >= 0 && rank < static_cast<int>(counts.size()), "rank {} outside {} counts", rank, counts.size());
  return static_cast<int64_t>(counts.size()) * counts[static_cast<size_t>(rank)];
}

// Leaves scratch[0 .. counts[rank]) holding this rank's reduced chunk. Elem: float (dtype kF32) or
// uint16_t (a 16-bit float format).
template <typename Elem>
static void reduce_own_chunk(Communicator& comm, const Elem* send, std::span<const int64_t> counts, Elem* scratch,
                             DType dtype) {
  const int n = comm.size();
  const int rank = comm.rank();
  SP_CHECK_EQ(static_cast<int64_t>(counts.size()), static_cast<int64_t>(n),
              "deterministic reduction on '{}': one count per rank", comm.name());
  const int64_t own = counts[static_cast<size_t>(rank)];
  // Rank q's send is laid out chunk by chunk, so sending chunk r to rank r is an all_to_all with
  // send_counts = counts; this rank receives n copies of its own chunk, copy q from rank q.
  const std::vector<int64_t> recv_counts(static_cast<size_t>(n), own);
  comm.all_to_all(send, counts, scratch, recv_counts, dtype);
  std::vector<Elem*> leaves(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) leaves[static_cast<size_t>(q)] = scratch + q * own;
  if constexpr (std::is_same_v<Elem, float>)
    kernels::canonical_tree_sum_inplace(leaves.data(), n, own);  // result in leaf 0 = scratch
  else
    kernels::canonical_tree_sum_inplace16(leaves.data(), n, own, dtype);
}

void deterministic_reduce_scatter(Communicator& comm, const float* send, float* recv, std::span<const int64_t> counts,
                                  float* scratch) {
  reduce_own_chunk(comm, send, counts, scratch, DType::kF32);
  const int64_t own = counts[static_cast<size_t>(comm.rank())];
  if (own > 0) std::memcpy(recv, scratch, static_cast<size_t>(own) * sizeof(float));
}

void deterministic_reduce_scatter16(Communicator& comm, const uint16_t* send, uint16_t* recv,
                                    std::span<const int64_t> counts, uint16_t* scratch, DType t) {
  reduce_own_chunk(comm, send, counts, scratch, t);
  const int64_t own = counts[static_cast<size_t>(comm.rank())];
  if (own > 0) std::memcpy(recv, scratch, static_cast<size_t>(own) * sizeof(uint16_t));
}

void deterministic_all_reduce16(Communicator& comm, uint16_t* data, int64_t count, uint16_t* scratch, DType t) {
  const std::vector<int64_t> counts = even_split_counts(count, comm.size());
  reduce_own_chunk(comm, data, counts, scratch, t);
  comm.all_gather(scratch, data, counts, t);
}

int64_t deterministic_all_reduce_scratch(int64_t count, int group_size) {
  SP_CHECK(count >= 0 && group_size >= 1, "scratch for {} floats over {} ranks", count, group_size);
  return group_size * ((count + group_size - 1) / group_size);
}

void deterministic_all_reduce(Communicator& comm, float* data, int64_t count, float* scratch) {
  const std::vector<int64_t> counts = even_split_counts(count, comm.size());
  reduce_own_chunk(comm, data, counts, scratch, DType::kF32);
  // Every rank now holds one reduced chunk in scratch; the all_gather writes them back in rank
  // order, so all ranks end with the same bits.
  comm.all_gather(scratch, data, counts, DType::kF32);
}

}  // namespace sp::comm
