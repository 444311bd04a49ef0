// Communicator: the small interface every collective and point-to-point transfer goes through.
// It is not MPI: MpiCommunicator (mpi_communicator.h) implements it, TracedCommunicator
// (traced_communicator.h) decorates it; code above comm/ sees only this header.
// Contract: every member of a group calls the same collectives in the same order with the same
// count/counts, dtype, reduce op and root (the trace checker proves it after the fact). Counts
// are element counts of `dtype`; any count ≥ 0 works, including counts above 2^31 − 1.
// Reference: docs/comm.md §3.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tensor/dtype.h"

namespace sp::comm {

enum class ReduceOp { kSum, kMax, kMin };
std::string_view reduce_op_name(ReduceOp op);  // "sum", "max", "min"
std::optional<ReduceOp> reduce_op_from_name(std::string_view name);

// The operations of the interface, named as they appear in the trace.
enum class OpKind {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kAllToAll,
  kBroadcast,
  kGather,
  kSend,
  kRecv,
  kIsend,
  kIrecv,
  kBarrier,
};
std::string_view op_kind_name(OpKind op);  // "all_reduce", ..., "barrier"
std::optional<OpKind> op_kind_from_name(std::string_view name);
bool op_is_p2p(OpKind op);  // send, recv, isend, irecv

// A pending non-blocking transfer. wait() completes it (idempotent); the destructor waits if the
// owner did not, because MPI requires every request to complete before its buffer is reused.
class Request {
 public:
  virtual ~Request() = default;
  virtual void wait() = 0;
  // True once the transfer is complete (then as wait()); false while it is in flight. Never blocks in an
  // implementation that can tell; the default waits.
  virtual bool test() {
    wait();
    return true;
  }
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Group name: "world", "dp[tp0.pp1]", "tp[dp1.pp0]", "pp[dp0.tp1]" (process_grid.h).
  virtual const std::string& name() const = 0;
  // Members' world ranks, in group-rank order.
  virtual std::span<const int> world_ranks() const = 0;

  // In place: data (count) := reduce over ranks of data. Reductions need a numeric dtype
  // (F32, F64, I8..I64, U8..U64); BF16/F16/BOOL are rejected with SP_CHECK.
  virtual void all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) = 0;
  // send holds Σcounts elements, chunk r at displ(r) = Σ_{q<r} counts[q];
  // recv (counts[rank]) := reduce over ranks of their send chunk `rank`. counts has size() entries.
  virtual void reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType dtype,
                              ReduceOp op) = 0;
  // send holds counts[rank] elements; recv (Σcounts) := concatenation of every rank's send, in rank order.
  virtual void all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType dtype) = 0;
  // Rank r sends send_counts[q] elements (consecutive blocks, in q order) to rank q and receives
  // recv_counts[q] elements from rank q (consecutive blocks, in q order).
  // send_counts[q] on rank r must equal recv_counts[r] on rank q.
  virtual void all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                          std::span<const int64_t> recv_counts, DType dtype) = 0;
  // data (count) on every rank := data on `root` (a group rank).
  virtual void broadcast(void* data, int64_t count, DType dtype, int root) = 0;
  // recv (Σcounts, on root only; others pass nullptr) := concatenation of every rank's send in rank
  // order. Every rank passes the same counts (size() entries) and count == counts[rank].
  virtual void gather(const void* send, int64_t count, void* recv, std::span<const int64_t> counts, DType dtype,
                      int root) = 0;
  // Blocking point-to-point; `peer` is a group rank, tag in [0, 32767] (the MPI minimum for MPI_TAG_UB).
  virtual void send(const void* data, int64_t count, DType dtype, int peer, int tag) = 0;
  virtual void recv(void* data, int64_t count, DType dtype, int peer, int tag) = 0;
  // Non-blocking; the buffer must stay valid and untouched until wait().
  virtual std::unique_ptr<Request> isend(const void* data, int64_t count, DType dtype, int peer, int tag) = 0;
  virtual std::unique_ptr<Request> irecv(void* data, int64_t count, DType dtype, int peer, int tag) = 0;
  virtual void barrier() = 0;

  // Non-blocking collectives (MPI-3 MPI_Iallreduce, MPI_Ireduce_scatter, MPI_Iallgatherv, and all_to_all's
  // own isend/irecv exchange): the same contract, counts and results as the blocking op above, issued now and
  // completed by the Request's wait() (or a test() that returns true). Every member posts a group's
  // collectives, blocking or not, in the same order; buffers (and `counts`, copied inside) stay untouched
  // until completion. An implementation that cannot overlap completes the op before returning (these
  // defaults, and MpiCommunicator above max_count): still correct, only not overlapped.
  virtual std::unique_ptr<Request> iall_reduce(void* data, int64_t count, DType dtype, ReduceOp op);
  virtual std::unique_ptr<Request> ireduce_scatter(const void* send, void* recv, std::span<const int64_t> counts,
                                                   DType dtype, ReduceOp op);
  virtual std::unique_ptr<Request> iall_gather(const void* send, void* recv, std::span<const int64_t> counts,
                                               DType dtype);
  virtual std::unique_ptr<Request> iall_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                                               std::span<const int64_t> recv_counts, DType dtype);
};

// A Request that is already complete (an op finished before it was returned).
class DoneRequest final : public Request {
 public:
  void wait() override {}
  bool test() override { return true; }
};

inline constexpr int kMaxTag = 32767;

}  // namespace sp::comm
