#include "comm/deterministic.h"

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

namespace {

// Checks the arguments; returns this rank's chunk size.
int64_t check_reduction(Communicator& comm, ConstBufView send, std::span<const int64_t> counts, BufView scratch) {
  const int n = comm.size();
  const int rank = comm.rank();
  SP_CHECK_EQ(static_cast<int64_t>(counts.size()), static_cast<int64_t>(n),
              "deterministic reduction on '{}': one count per rank", comm.name());
  SP_CHECK(send.dtype == scratch.dtype, "deterministic reduction on '{}': {} data with {} scratch", comm.name(),
           dtype_name(send.dtype), dtype_name(scratch.dtype));
  const int64_t own = counts[static_cast<size_t>(rank)];
  SP_CHECK_GE(scratch.count, n * own, "deterministic reduction on '{}': scratch", comm.name());
  return own;
}

// The n received copies of this rank's chunk, scratch[q·own ..), summed over the canonical tree into leaf 0.
void sum_copies(BufView scratch, int n, int64_t own) {
  std::vector<BufView> leaves;
  for (int q = 0; q < n; ++q) leaves.push_back(scratch.slice(q * own, own));
  kernels::canonical_tree_sum_inplace(leaves);  // result in leaf 0 = scratch
}

// Leaves scratch[0 .. counts[rank]) holding this rank's reduced chunk (elements of send's dtype).
void reduce_own_chunk(Communicator& comm, ConstBufView send, std::span<const int64_t> counts, BufView scratch) {
  const int n = comm.size();
  const int64_t own = check_reduction(comm, send, counts, scratch);
  // Rank q's send is laid out chunk by chunk, so sending chunk r to rank r is an all_to_all with
  // send_counts = counts; this rank receives n copies of its own chunk, copy q from rank q.
  const std::vector<int64_t> recv_counts(static_cast<size_t>(n), own);
  comm.all_to_all(send.data, counts, scratch.data, recv_counts, send.dtype);
  sum_copies(scratch, n, own);
}

}  // namespace

void deterministic_reduce_scatter(Communicator& comm, ConstBufView send, BufView recv, std::span<const int64_t> counts,
                                  BufView scratch) {
  reduce_own_chunk(comm, send, counts, scratch);
  const int64_t own = counts[static_cast<size_t>(comm.rank())];
  SP_CHECK(recv.count == own && recv.dtype == send.dtype, "deterministic reduce_scatter on '{}': recv of {} {}",
           comm.name(), recv.count, dtype_name(recv.dtype));
  convert(recv, scratch.slice(0, own));
}

int64_t deterministic_all_reduce_scratch(int64_t count, int group_size) {
  SP_CHECK(count >= 0 && group_size >= 1, "scratch for {} elements over {} ranks", count, group_size);
  return group_size * ((count + group_size - 1) / group_size);
}

void deterministic_all_reduce(Communicator& comm, BufView data, BufView scratch) {
  const std::vector<int64_t> counts = even_split_counts(data.count, comm.size());
  reduce_own_chunk(comm, data, counts, scratch);
  // Every rank now holds one reduced chunk in scratch; the all_gather writes them back in rank
  // order, so all ranks end with the same bits.
  comm.all_gather(scratch.data, data.data, counts, data.dtype);
}

}  // namespace sp::comm

namespace sp::comm {

PendingReduction::PendingReduction(Communicator& comm, BufView scratch, std::vector<int64_t> counts, BufView out,
                                   bool gather)
    : comm_(comm), scratch_(scratch), counts_(std::move(counts)), out_(out), gather_(gather) {}

std::unique_ptr<PendingReduction> PendingReduction::start_reduce_scatter(Communicator& comm, ConstBufView send,
                                                                         BufView recv, std::span<const int64_t> counts,
                                                                         BufView scratch) {
  const int64_t own = check_reduction(comm, send, counts, scratch);
  SP_CHECK(recv.count == own && recv.dtype == send.dtype, "deterministic reduce_scatter on '{}': recv of {} {}",
           comm.name(), recv.count, dtype_name(recv.dtype));
  std::unique_ptr<PendingReduction> p(
      new PendingReduction(comm, scratch, std::vector<int64_t>(counts.begin(), counts.end()), recv, false));
  const std::vector<int64_t> recv_counts(static_cast<size_t>(comm.size()), own);
  p->request_ = comm.iall_to_all(send.data, counts, scratch.data, recv_counts, send.dtype);
  return p;
}

std::unique_ptr<PendingReduction> PendingReduction::start_all_reduce(Communicator& comm, BufView data,
                                                                     BufView scratch) {
  std::vector<int64_t> counts = even_split_counts(data.count, comm.size());
  const int64_t own = check_reduction(comm, data, counts, scratch);
  std::unique_ptr<PendingReduction> p(new PendingReduction(comm, scratch, counts, data, true));
  const std::vector<int64_t> recv_counts(static_cast<size_t>(comm.size()), own);
  p->request_ = comm.iall_to_all(data.data, p->counts_, scratch.data, recv_counts, data.dtype);
  return p;
}

void PendingReduction::sum() {
  const int64_t own = counts_[static_cast<size_t>(comm_.rank())];
  sum_copies(scratch_, comm_.size(), own);
  request_.reset();
  if (gather_) {
    stage_ = Stage::kSummed;
    return;
  }
  convert(out_, scratch_.slice(0, own));
  stage_ = Stage::kDone;
}

bool PendingReduction::test() {
  if (stage_ == Stage::kExchange && request_->test()) sum();
  if (stage_ == Stage::kGather && request_->test()) {
    request_.reset();
    stage_ = Stage::kDone;
  }
  return done();
}

void PendingReduction::advance() {
  if (stage_ == Stage::kExchange) {
    request_->wait();
    sum();
  }
  if (stage_ == Stage::kSummed) {  // every rank holds one reduced chunk: gather them back in rank order
    request_ = comm_.iall_gather(scratch_.data, out_.data, counts_, out_.dtype);
    stage_ = Stage::kGather;
  }
}

void PendingReduction::wait() {
  advance();
  if (stage_ == Stage::kGather) {
    request_->wait();
    request_.reset();
    stage_ = Stage::kDone;
  }
}

}  // namespace sp::comm
