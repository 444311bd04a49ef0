// Deterministic reductions: bit-identical results on every rank, equal to
// kernels::canonical_tree_sum_inplace over the group's contributions with leaf r = group rank r's
// buffer (kernels/reduce.h), whatever MPI library, algorithm or rank count is underneath.
// Not a fast path: Communicator::all_reduce / reduce_scatter are the fast mode (MPI's order).
// Algorithm (docs/comm.md §4): an all_to_all hands each owner r every rank's copy of chunk r
// (counts[r] elements); the owner sums the n copies over the canonical tree; all_reduce then
// all_gathers the owned chunks. Per-rank traffic: reduce_scatter (n−1)/n of the payload,
// all_reduce 2·(n−1)/n: the bandwidth-optimal amounts of the ring algorithms.
// Staging memory comes from the caller (sized by the *_scratch functions) so it can be ledgered.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/communicator.h"
#include "tensor/buf_view.h"

namespace sp::comm {

// `total` split into `parts` contiguous chunks, the first total % parts one element longer.
std::vector<int64_t> even_split_counts(int64_t total, int parts);

// Every buffer is a typed view (tensor/buf_view.h) of one float dtype: F32, or BF16/F16 (mixed precision's
// 16-bit gradients and working weights), whose tree nodes are each rounded once (kernels::add_into).
// Scratch is counted in elements of that dtype and comes from the caller.

// Elements of scratch deterministic_reduce_scatter needs on group rank `rank`: size · counts[rank].
int64_t deterministic_reduce_scatter_scratch(std::span<const int64_t> counts, int rank);
// recv (counts[rank]) := canonical tree sum over group ranks r of send_r[displ(rank) .. + counts[rank]).
// send holds Σcounts elements on every rank; scratch at least deterministic_reduce_scatter_scratch.
void deterministic_reduce_scatter(Communicator& comm, ConstBufView send, BufView recv, std::span<const int64_t> counts,
                                  BufView scratch);

// Elements of scratch deterministic_all_reduce needs: size · ⌈count / size⌉ (equal on every rank).
int64_t deterministic_all_reduce_scratch(int64_t count, int group_size);
// In place: data := canonical tree sum over group ranks of data, chunked by even_split_counts(data.count).
void deterministic_all_reduce(Communicator& comm, BufView data, BufView scratch);

}  // namespace sp::comm
