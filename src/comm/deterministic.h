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
#include <memory>
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

// The same two reductions, non-blocking (Communicator's i-collectives): start() posts the all_to_all; the
// owner's canonical sum runs once it has completed (in test() or advance()); the all_reduce's all_gather
// is posted by advance(). Same algorithm, same bits, same trace records (marked nonblocking); only the
// timing moves. Posting order: every member must post a group's collectives in the same order, and
// whether test() saw the exchange complete differs between ranks, so test() never posts: only advance()
// and wait() do, and the owner calls them at points that are the same on every member.
// Buffers (send/data, recv, scratch) stay untouched by the owner until done().
class PendingReduction {
 public:
  // recv (counts[rank]) := canonical sum of the send chunks, as deterministic_reduce_scatter.
  static std::unique_ptr<PendingReduction> start_reduce_scatter(Communicator& comm, ConstBufView send, BufView recv,
                                                                std::span<const int64_t> counts, BufView scratch);
  // In place, as deterministic_all_reduce.
  static std::unique_ptr<PendingReduction> start_all_reduce(Communicator& comm, BufView data, BufView scratch);

  // Progresses without posting: completes the exchange (then sums) or the gather if MPI has. True once done.
  bool test();
  // Completes the exchange (waiting if needed), sums, and posts the all_gather of an all_reduce.
  void advance();
  // Everything: advance(), then the gather.
  void wait();
  bool done() const { return stage_ == Stage::kDone; }

 private:
  enum class Stage { kExchange, kSummed, kGather, kDone };
  PendingReduction(Communicator& comm, BufView scratch, std::vector<int64_t> counts, BufView out, bool gather);
  void sum();  // the owner's canonical tree over the n received copies; then kSummed (or kDone, scattered)

  Communicator& comm_;
  BufView scratch_;
  std::vector<int64_t> counts_;
  BufView out_;  // all_reduce: the data (gathered into); reduce_scatter: recv
  bool gather_;  // all_reduce
  Stage stage_ = Stage::kExchange;
  std::unique_ptr<Request> request_;
};

}  // namespace sp::comm
