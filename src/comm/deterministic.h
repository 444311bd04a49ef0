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

namespace sp::comm {

// `total` split into `parts` contiguous chunks, the first total % parts one element longer.
std::vector<int64_t> even_split_counts(int64_t total, int parts);

// Floats of scratch deterministic_reduce_scatter needs on group rank `rank`: size · counts[rank].
int64_t deterministic_reduce_scatter_scratch(std::span<const int64_t> counts, int rank);
// recv (counts[rank]) := canonical tree sum over group ranks r of send_r[displ(rank) .. + counts[rank]).
// send holds Σcounts floats on every rank; `scratch` holds deterministic_reduce_scatter_scratch floats.
void deterministic_reduce_scatter(Communicator& comm, const float* send, float* recv, std::span<const int64_t> counts,
                                  float* scratch);

// Floats of scratch deterministic_all_reduce needs: size · ⌈count / size⌉ (equal on every rank).
int64_t deterministic_all_reduce_scratch(int64_t count, int group_size);
// In place: data (count) := canonical tree sum over group ranks of data, chunked by even_split_counts.
void deterministic_all_reduce(Communicator& comm, float* data, int64_t count, float* scratch);

// The same two for 16-bit patterns of format t (kBF16 or kF16), summed with kernels::add_into16 (every
// node rounded once): mixed precision's 16-bit gradients. Scratch is counted in 16-bit elements.
void deterministic_reduce_scatter16(Communicator& comm, const uint16_t* send, uint16_t* recv,
                                    std::span<const int64_t> counts, uint16_t* scratch, DType t);
void deterministic_all_reduce16(Communicator& comm, uint16_t* data, int64_t count, uint16_t* scratch, DType t);

}  // namespace sp::comm
