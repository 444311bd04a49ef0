#include "comm/traced_communicator.h"

#include <numeric>

#include "comm/trace_writer.h"
#include "comm/watchdog.h"
#include "core/check.h"
#include "core/time_split.h"
#include "core/timer.h"

namespace sp::comm {
namespace {
int64_t sum(std::span<const int64_t> counts) { return std::accumulate(counts.begin(), counts.end(), int64_t{0}); }
int64_t nbytes(int64_t count, DType dtype) { return count * static_cast<int64_t>(dtype_size(dtype)); }

// An untraced request whose completion is counted as waiting (core/time_split.h), as a traced one's is.
class TimedRequest final : public Request {
 public:
  explicit TimedRequest(std::unique_ptr<Request> inner) : inner_(std::move(inner)) {}
  ~TimedRequest() override { wait(); }
  void wait() override {
    if (done_) return;
    const TimeScope timed(TimeKind::kWait);
    inner_->wait();
    done_ = true;
  }
  bool test() override {
    if (done_) return true;
    const TimeScope timed(TimeKind::kComm);
    done_ = inner_->test();
    return done_;
  }

 private:
  std::unique_ptr<Request> inner_;
  bool done_ = false;
};

}  // namespace

// Completes the wrapped request under the watchdog and writes the record with its digests: of `in_at_end`
// (an isend's payload, unchanged while in flight) and of `out` (what the op wrote) at completion.
class TracedCommunicator::TracedRequest final : public Request {
 public:
  TracedRequest(TracedCommunicator& owner, std::unique_ptr<Request> inner, TraceRecord record, const void* in_at_end,
                const void* out, int64_t out_bytes)
      : owner_(owner),
        inner_(std::move(inner)),
        record_(std::move(record)),
        in_at_end_(in_at_end),
        out_(out),
        out_bytes_(out_bytes) {}
  ~TracedRequest() override { wait(); }

  void wait() override {
    if (done_) return;
    const TimeScope timed(TimeKind::kWait);
    const uint64_t ticket =
        owner_.watchdog_ != nullptr ? owner_.watchdog_->begin(record_, owner_.inner_->world_ranks()) : 0;
    inner_->wait();
    if (owner_.watchdog_ != nullptr) owner_.watchdog_->end(ticket);
    complete();
  }
  // A completed test is the end of the op (written as wait() would); an incomplete one is not watched:
  // the owner decides when to wait.
  bool test() override {
    if (done_) return true;
    const TimeScope timed(TimeKind::kComm);
    if (!inner_->test()) return false;
    complete();
    return true;
  }

 private:
  void complete() {
    done_ = true;
    if (owner_.writer_ == nullptr) return;
    record_.t_end_us = wall_us();
    const TimeScope digest(TimeKind::kEvidence);
    if (in_at_end_ != nullptr) record_.in_digest = xxh3_128(in_at_end_, static_cast<size_t>(record_.bytes));
    if (out_ != nullptr) record_.out_digest = xxh3_128(out_, static_cast<size_t>(out_bytes_));
    owner_.finish(record_);
  }

  TracedCommunicator& owner_;
  std::unique_ptr<Request> inner_;
  TraceRecord record_;
  const void* in_at_end_;
  const void* out_;
  int64_t out_bytes_;
  bool done_ = false;
};

TracedCommunicator::TracedCommunicator(std::unique_ptr<Communicator> inner, const TraceContext& context,
                                       TraceWriter* writer, Watchdog* watchdog)
    : inner_(std::move(inner)), context_(context), writer_(writer), watchdog_(watchdog) {
  SP_CHECK(inner_ != nullptr, "TracedCommunicator needs a communicator to wrap");
}

TracedCommunicator::~TracedCommunicator() = default;

bool TracedCommunicator::needs_record() const {
  return writer_ != nullptr || (watchdog_ != nullptr && watchdog_->enabled());
}

TraceRecord TracedCommunicator::start_record(OpKind op, DType dtype, int64_t count) {
  TraceRecord r;
  r.group = inner_->name();
  r.group_size = inner_->size();
  r.group_rank = inner_->rank();
  r.seq = seq_++;
  r.op = op;
  r.dtype = dtype;
  r.count = count;
  r.bytes = op == OpKind::kBarrier ? 0 : nbytes(count, dtype);
  r.wire_bytes = wire_bytes_of(op, r.bytes, r.group_size);
  r.phase = context_.phase();
  r.step = context_.step();
  r.micro_batch = context_.micro_batch();
  return r;
}

template <typename Call>
void TracedCommunicator::run(TraceRecord& r, const void* in, int64_t in_bytes, Call&& call, const void* out,
                             int64_t out_bytes) {
  if (writer_ != nullptr && in != nullptr) {
    const TimeScope digest(TimeKind::kEvidence);
    r.in_digest = xxh3_128(in, static_cast<size_t>(in_bytes));
  }
  r.t_start_us = wall_us();
  const uint64_t ticket = watchdog_ != nullptr ? watchdog_->begin(r, inner_->world_ranks()) : 0;
  call();
  r.t_end_us = wall_us();
  if (watchdog_ != nullptr) watchdog_->end(ticket);
  if (writer_ == nullptr) return;
  const TimeScope digest(TimeKind::kEvidence);
  if (out != nullptr) r.out_digest = xxh3_128(out, static_cast<size_t>(out_bytes));
  finish(r);
}

void TracedCommunicator::finish(TraceRecord& r) {
  if (!members_written_) {
    r.members.assign(inner_->world_ranks().begin(), inner_->world_ranks().end());
    members_written_ = true;
  }
  writer_->append(r);
}

void TracedCommunicator::all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return inner_->all_reduce(data, count, dtype, op);
  }
  TraceRecord r = start_record(OpKind::kAllReduce, dtype, count);
  r.reduce = op;
  run(
      r, data, r.bytes, [&] { inner_->all_reduce(data, count, dtype, op); }, data, r.bytes);
}

void TracedCommunicator::reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType dtype,
                                        ReduceOp op) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return inner_->reduce_scatter(send, recv, counts, dtype, op);
  }
  SP_CHECK_EQ(static_cast<int64_t>(counts.size()), static_cast<int64_t>(size()), "reduce_scatter on '{}'", name());
  TraceRecord r = start_record(OpKind::kReduceScatter, dtype, sum(counts));
  r.counts.assign(counts.begin(), counts.end());
  r.reduce = op;
  run(
      r, send, r.bytes, [&] { inner_->reduce_scatter(send, recv, counts, dtype, op); }, recv,
      nbytes(counts[static_cast<size_t>(rank())], dtype));
}

void TracedCommunicator::all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType dtype) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return inner_->all_gather(send, recv, counts, dtype);
  }
  SP_CHECK_EQ(static_cast<int64_t>(counts.size()), static_cast<int64_t>(size()), "all_gather on '{}'", name());
  TraceRecord r = start_record(OpKind::kAllGather, dtype, sum(counts));
  r.counts.assign(counts.begin(), counts.end());
  run(
      r, send, nbytes(counts[static_cast<size_t>(rank())], dtype),
      [&] { inner_->all_gather(send, recv, counts, dtype); }, recv, r.bytes);
}

void TracedCommunicator::all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                                    std::span<const int64_t> recv_counts, DType dtype) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return inner_->all_to_all(send, send_counts, recv, recv_counts, dtype);
  }
  SP_CHECK(static_cast<int>(send_counts.size()) == size() && static_cast<int>(recv_counts.size()) == size(),
           "all_to_all on '{}': one send and one recv count per rank", name());
  TraceRecord r = start_record(OpKind::kAllToAll, dtype, sum(send_counts));
  r.counts.assign(send_counts.begin(), send_counts.end());
  r.recv_counts.assign(recv_counts.begin(), recv_counts.end());
  run(
      r, send, r.bytes, [&] { inner_->all_to_all(send, send_counts, recv, recv_counts, dtype); }, recv,
      nbytes(sum(recv_counts), dtype));
}

void TracedCommunicator::broadcast(void* data, int64_t count, DType dtype, int root) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return inner_->broadcast(data, count, dtype, root);
  }
  SP_CHECK(root >= 0 && root < size(), "broadcast root {} is not a rank of '{}'", root, name());
  TraceRecord r = start_record(OpKind::kBroadcast, dtype, count);
  r.root = root;
  r.root_world = world_ranks()[static_cast<size_t>(root)];
  // Only the root's buffer holds data before the op; elsewhere it is about to be overwritten.
  run(
      r, rank() == root ? data : nullptr, r.bytes, [&] { inner_->broadcast(data, count, dtype, root); }, data, r.bytes);
}

void TracedCommunicator::gather(const void* send, int64_t count, void* recv, std::span<const int64_t> counts,
                                DType dtype, int root) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return inner_->gather(send, count, recv, counts, dtype, root);
  }
  SP_CHECK(root >= 0 && root < size(), "gather root {} is not a rank of '{}'", root, name());
  SP_CHECK_EQ(static_cast<int64_t>(counts.size()), static_cast<int64_t>(size()), "gather on '{}'", name());
  TraceRecord r = start_record(OpKind::kGather, dtype, sum(counts));
  r.counts.assign(counts.begin(), counts.end());
  r.root = root;
  r.root_world = world_ranks()[static_cast<size_t>(root)];
  run(
      r, send, nbytes(count, dtype), [&] { inner_->gather(send, count, recv, counts, dtype, root); },
      rank() == root ? recv : nullptr, r.bytes);
}

void TracedCommunicator::send(const void* data, int64_t count, DType dtype, int peer, int tag) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return inner_->send(data, count, dtype, peer, tag);
  }
  SP_CHECK(peer >= 0 && peer < size(), "send peer {} is not a rank of '{}'", peer, name());
  TraceRecord r = start_record(OpKind::kSend, dtype, count);
  r.peer = peer;
  r.peer_world = world_ranks()[static_cast<size_t>(peer)];
  r.tag = tag;
  run(
      r, data, r.bytes, [&] { inner_->send(data, count, dtype, peer, tag); }, nullptr, 0);
}

void TracedCommunicator::recv(void* data, int64_t count, DType dtype, int peer, int tag) {
  const TimeScope timed(TimeKind::kWait);
  if (!needs_record()) {
    ++seq_;
    return inner_->recv(data, count, dtype, peer, tag);
  }
  SP_CHECK(peer >= 0 && peer < size(), "recv peer {} is not a rank of '{}'", peer, name());
  TraceRecord r = start_record(OpKind::kRecv, dtype, count);
  r.peer = peer;
  r.peer_world = world_ranks()[static_cast<size_t>(peer)];
  r.tag = tag;
  run(
      r, nullptr, 0, [&] { inner_->recv(data, count, dtype, peer, tag); }, data, r.bytes);
}

std::unique_ptr<Request> TracedCommunicator::isend(const void* data, int64_t count, DType dtype, int peer, int tag) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return std::make_unique<TimedRequest>(inner_->isend(data, count, dtype, peer, tag));
  }
  SP_CHECK(peer >= 0 && peer < size(), "isend peer {} is not a rank of '{}'", peer, name());
  TraceRecord r = start_record(OpKind::kIsend, dtype, count);
  r.peer = peer;
  r.peer_world = world_ranks()[static_cast<size_t>(peer)];
  r.tag = tag;
  r.t_start_us = wall_us();
  std::unique_ptr<Request> inner = inner_->isend(data, count, dtype, peer, tag);
  return std::make_unique<TracedRequest>(*this, std::move(inner), std::move(r), data, nullptr, 0);
}

std::unique_ptr<Request> TracedCommunicator::irecv(void* data, int64_t count, DType dtype, int peer, int tag) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return std::make_unique<TimedRequest>(inner_->irecv(data, count, dtype, peer, tag));
  }
  SP_CHECK(peer >= 0 && peer < size(), "irecv peer {} is not a rank of '{}'", peer, name());
  TraceRecord r = start_record(OpKind::kIrecv, dtype, count);
  r.peer = peer;
  r.peer_world = world_ranks()[static_cast<size_t>(peer)];
  r.tag = tag;
  r.t_start_us = wall_us();
  std::unique_ptr<Request> inner = inner_->irecv(data, count, dtype, peer, tag);
  return std::make_unique<TracedRequest>(*this, std::move(inner), std::move(r), nullptr, data, r.bytes);
}

void TracedCommunicator::barrier() {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return inner_->barrier();
  }
  TraceRecord r = start_record(OpKind::kBarrier, DType::kU8, 0);
  run(
      r, nullptr, 0, [&] { inner_->barrier(); }, nullptr, 0);
}

template <typename Post>
std::unique_ptr<Request> TracedCommunicator::post(TraceRecord& r, const void* in, int64_t in_bytes, Post&& call,
                                                  const void* out, int64_t out_bytes) {
  if (writer_ != nullptr && in != nullptr) {
    const TimeScope digest(TimeKind::kEvidence);
    r.in_digest = xxh3_128(in, static_cast<size_t>(in_bytes));
  }
  r.nonblocking = true;
  r.t_start_us = wall_us();
  // Watched while posting too: an implementation may complete the op before it returns (Communicator's
  // defaults, MPI's split paths above max_count).
  const uint64_t ticket = watchdog_ != nullptr ? watchdog_->begin(r, inner_->world_ranks()) : 0;
  std::unique_ptr<Request> inner = call();
  if (watchdog_ != nullptr) watchdog_->end(ticket);
  return std::make_unique<TracedRequest>(*this, std::move(inner), std::move(r), nullptr, out, out_bytes);
}

std::unique_ptr<Request> TracedCommunicator::iall_reduce(void* data, int64_t count, DType dtype, ReduceOp op) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return std::make_unique<TimedRequest>(inner_->iall_reduce(data, count, dtype, op));
  }
  TraceRecord r = start_record(OpKind::kAllReduce, dtype, count);
  r.reduce = op;
  return post(
      r, data, r.bytes, [&] { return inner_->iall_reduce(data, count, dtype, op); }, data, r.bytes);
}

std::unique_ptr<Request> TracedCommunicator::ireduce_scatter(const void* send, void* recv,
                                                             std::span<const int64_t> counts, DType dtype,
                                                             ReduceOp op) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return std::make_unique<TimedRequest>(inner_->ireduce_scatter(send, recv, counts, dtype, op));
  }
  SP_CHECK_EQ(static_cast<int64_t>(counts.size()), static_cast<int64_t>(size()), "ireduce_scatter on '{}'", name());
  TraceRecord r = start_record(OpKind::kReduceScatter, dtype, sum(counts));
  r.counts.assign(counts.begin(), counts.end());
  r.reduce = op;
  return post(
      r, send, r.bytes, [&] { return inner_->ireduce_scatter(send, recv, counts, dtype, op); }, recv,
      nbytes(counts[static_cast<size_t>(rank())], dtype));
}

std::unique_ptr<Request> TracedCommunicator::iall_gather(const void* send, void* recv, std::span<const int64_t> counts,
                                                         DType dtype) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return std::make_unique<TimedRequest>(inner_->iall_gather(send, recv, counts, dtype));
  }
  SP_CHECK_EQ(static_cast<int64_t>(counts.size()), static_cast<int64_t>(size()), "iall_gather on '{}'", name());
  TraceRecord r = start_record(OpKind::kAllGather, dtype, sum(counts));
  r.counts.assign(counts.begin(), counts.end());
  return post(
      r, send, nbytes(counts[static_cast<size_t>(rank())], dtype),
      [&] { return inner_->iall_gather(send, recv, counts, dtype); }, recv, r.bytes);
}

std::unique_ptr<Request> TracedCommunicator::iall_to_all(const void* send, std::span<const int64_t> send_counts,
                                                         void* recv, std::span<const int64_t> recv_counts,
                                                         DType dtype) {
  const TimeScope timed(TimeKind::kComm);
  if (!needs_record()) {
    ++seq_;
    return std::make_unique<TimedRequest>(inner_->iall_to_all(send, send_counts, recv, recv_counts, dtype));
  }
  SP_CHECK(static_cast<int>(send_counts.size()) == size() && static_cast<int>(recv_counts.size()) == size(),
           "iall_to_all on '{}': one send and one recv count per rank", name());
  TraceRecord r = start_record(OpKind::kAllToAll, dtype, sum(send_counts));
  r.counts.assign(send_counts.begin(), send_counts.end());
  r.recv_counts.assign(recv_counts.begin(), recv_counts.end());
  return post(
      r, send, r.bytes, [&] { return inner_->iall_to_all(send, send_counts, recv, recv_counts, dtype); }, recv,
      nbytes(sum(recv_counts), dtype));
}

void trace_communicators(GridCommunicators& comms, const TraceContext& context, TraceWriter* writer,
                         Watchdog* watchdog) {
  for (std::unique_ptr<Communicator>* c : {&comms.world, &comms.dp, &comms.tp, &comms.pp, &comms.ps})
    if (*c != nullptr) *c = std::make_unique<TracedCommunicator>(std::move(*c), context, writer, watchdog);
}

}  // namespace sp::comm
