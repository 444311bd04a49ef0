// TracedCommunicator: the decorator every op goes through. It forwards each call to the wrapped
// Communicator, tells the Watchdog when the op starts and ends, and (when a TraceWriter is given)
// writes one TraceRecord per op: seq, op, dtype, counts, bytes, wire_bytes, root/peer, phase,
// step, micro-batch from the TraceContext, wall-clock start/end and XXH3-128 digests of the input
// and output payloads. It adds no communication and never changes the data.
// Without a writer, tracing is off: no file, no digests, no record unless the watchdog needs one.
// Invariant: one TracedCommunicator per group per rank, so `seq` numbers every op this rank issued
// on the group, from 0, without gaps. Non-blocking ops (isend, irecv and the i-collectives) take their seq
// when posted and are written (with digests) when wait() completes them, so a file is in completion order
// (readers sort a group's records by seq). Like the MPI communicator below it, one thread issues
// a given communicator's ops. Reference: docs/formats/trace.md.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/trace_context.h"
#include "comm/trace_record.h"

namespace sp::comm {

class TraceWriter;
class Watchdog;

class TracedCommunicator final : public Communicator {
 public:
  // `context` must outlive this object; `writer` and `watchdog` may be null and must outlive it too.
  // A Request returned by isend/irecv must be completed before this object is destroyed.
  TracedCommunicator(std::unique_ptr<Communicator> inner, const TraceContext& context, TraceWriter* writer,
                     Watchdog* watchdog);
  ~TracedCommunicator() override;

  Communicator& inner() { return *inner_; }
  bool tracing() const { return writer_ != nullptr; }
  int64_t ops_issued() const { return seq_; }

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }
  std::span<const int> world_ranks() const override { return inner_->world_ranks(); }

  void all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType dtype, ReduceOp op) override;
  void all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType dtype) override;
  void all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                  std::span<const int64_t> recv_counts, DType dtype) override;
  void broadcast(void* data, int64_t count, DType dtype, int root) override;
  void gather(const void* send, int64_t count, void* recv, std::span<const int64_t> counts, DType dtype,
              int root) override;
  void send(const void* data, int64_t count, DType dtype, int peer, int tag) override;
  void recv(void* data, int64_t count, DType dtype, int peer, int tag) override;
  std::unique_ptr<Request> isend(const void* data, int64_t count, DType dtype, int peer, int tag) override;
  std::unique_ptr<Request> irecv(void* data, int64_t count, DType dtype, int peer, int tag) override;
  void barrier() override;
  // Traced like isend/irecv: seq and input digest when posted, the record (op name of the blocking op,
  // "nonblocking": true) with its output digest when completed; the watchdog watches the post and each wait().
  std::unique_ptr<Request> iall_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override;
  std::unique_ptr<Request> ireduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType dtype,
                                           ReduceOp op) override;
  std::unique_ptr<Request> iall_gather(const void* send, void* recv, std::span<const int64_t> counts,
                                       DType dtype) override;
  std::unique_ptr<Request> iall_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                                       std::span<const int64_t> recv_counts, DType dtype) override;

 private:
  class TracedRequest;
  friend class TracedRequest;

  // Fills the op-independent fields and the next seq. `counts` is the per-rank count list, if any.
  TraceRecord start_record(OpKind op, DType dtype, int64_t count);
  // Watchdog begin, timing, inner call, digests, write.
  template <typename Call>
  void run(TraceRecord& record, const void* in, int64_t in_bytes, Call&& call, const void* out, int64_t out_bytes);
  // Input digest, watchdog around the post, a TracedRequest that writes the record at completion.
  template <typename Post>
  std::unique_ptr<Request> post(TraceRecord& record, const void* in, int64_t in_bytes, Post&& call, const void* out,
                                int64_t out_bytes);
  void finish(TraceRecord& record);
  bool needs_record() const;

  std::unique_ptr<Communicator> inner_;
  const TraceContext& context_;
  TraceWriter* writer_;
  Watchdog* watchdog_;
  int64_t seq_ = 0;
  bool members_written_ = false;
};

// Replaces world, dp, tp and pp of `comms` by TracedCommunicators around them that share
// `context`, `writer` and `watchdog` (the usual setup: one writer and one watchdog per rank).
void trace_communicators(GridCommunicators& comms, const TraceContext& context, TraceWriter* writer,
                         Watchdog* watchdog);

}  // namespace sp::comm
