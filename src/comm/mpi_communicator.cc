// MpiCommunicator: Communicator over one MPI_Comm. Every MPI call is checked (mpi_check.h).
// Large transfers: an operation whose element counts or displacements exceed max_count is split.
// all_reduce, broadcast and p2p split into consecutive chunks; reduce_scatter, all_gather and
// gather fall back to per-owner chunked reduce/broadcast/p2p; all_to_all always posts one
// isend/irecv per peer and chunk. These internal p2p transfers use a private duplicate of the
// communicator, so they can never match a user's send/recv with the same tag.
// The groups themselves (world, the grid's axes, the parameter-server layout) are built in mpi_groups.cc.
#include "comm/mpi_communicator.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "comm/mpi_check.h"
#include "comm/mpi_comm_wrap.h"
#include "comm/mpi_scope.h"
#include "comm/mpi_types.h"
#include "core/check.h"

namespace sp::comm {
namespace {

using mpi_detail::at;
using mpi_detail::mpi_op;
using mpi_detail::mpi_type;
using mpi_detail::reducible;

// Completes a set of MPI requests. `arrays` keeps the count and displacement arrays of a non-blocking
// v-collective alive until completion, as MPI requires.
class MpiRequest final : public Request {
 public:
  explicit MpiRequest(std::vector<MPI_Request> requests, std::vector<std::vector<int>> arrays = {})
      : requests_(std::move(requests)), arrays_(std::move(arrays)) {}
  ~MpiRequest() override { wait(); }
  void wait() override {
    if (requests_.empty()) return;
    SP_MPI_CHECK(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE));
    requests_.clear();
  }
  bool test() override {
    if (requests_.empty()) return true;
    int done = 0;
    SP_MPI_CHECK(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
    if (done) requests_.clear();
    return done != 0;
  }

 private:
  std::vector<MPI_Request> requests_;
  std::vector<std::vector<int>> arrays_;
};

class MpiCommunicator final : public Communicator {
 public:
  // Takes ownership of `comm`.
  MpiCommunicator(MPI_Comm comm, std::string name, const MpiCommOptions& options)
      : comm_(comm), name_(std::move(name)), max_count_(options.max_count) {
    SP_CHECK(max_count_ >= 1 && max_count_ <= INT_MAX, "max_count {} must be in [1, {}]", max_count_, INT_MAX);
    SP_MPI_CHECK(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    SP_MPI_CHECK(MPI_Comm_rank(comm_, &rank_));
    SP_MPI_CHECK(MPI_Comm_size(comm_, &size_));
    SP_MPI_CHECK(MPI_Comm_dup(comm_, &internal_));
    MPI_Group group, world_group;
    SP_MPI_CHECK(MPI_Comm_group(comm_, &group));
    SP_MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    std::vector<int> local(static_cast<size_t>(size_));
    std::iota(local.begin(), local.end(), 0);
    world_ranks_.resize(local.size());
    SP_MPI_CHECK(MPI_Group_translate_ranks(group, size_, local.data(), world_group, world_ranks_.data()));
    SP_MPI_CHECK(MPI_Group_free(&group));
    SP_MPI_CHECK(MPI_Group_free(&world_group));
  }
  ~MpiCommunicator() override {
    if (!MpiScope::initialized()) return;  // MPI_Finalize already released every communicator
    MPI_Comm_free(&internal_);
    MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& name() const override { return name_; }
  std::span<const int> world_ranks() const override { return world_ranks_; }

  void all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    check_reduce(count, dtype, "all_reduce");
    for_each_chunk(count, [&](int64_t off, int n) {
      SP_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, at(data, off, dtype), n, mpi_type(dtype), mpi_op(op), comm_));
    });
  }

  void reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType dtype,
                      ReduceOp op) override {
    const int64_t total = check_counts(counts, "reduce_scatter");
    check_reduce(total, dtype, "reduce_scatter");
    if (total <= max_count_) {
      const std::vector<int> c = to_int(counts);
      SP_MPI_CHECK(MPI_Reduce_scatter(send, recv, c.data(), mpi_type(dtype), mpi_op(op), comm_));
      return;
    }
    // Each owner r receives the reduction of chunk r, one chunked MPI_Reduce at a time.
    int64_t displ = 0;
    for (int r = 0; r < size_; ++r) {
      const int64_t n_r = counts[static_cast<size_t>(r)];
      for_each_chunk(n_r, [&](int64_t off, int n) {
        void* out = r == rank_ ? at(recv, off, dtype) : nullptr;
        SP_MPI_CHECK(MPI_Reduce(at(send, displ + off, dtype), out, n, mpi_type(dtype), mpi_op(op), r, comm_));
      });
      displ += n_r;
    }
  }

  void all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType dtype) override {
    const int64_t total = check_counts(counts, "all_gather");
    if (total <= max_count_) {
      const std::vector<int> c = to_int(counts);
      const std::vector<int> d = displacements(c);
      SP_MPI_CHECK(MPI_Allgatherv(send, c[static_cast<size_t>(rank_)], mpi_type(dtype), recv, c.data(), d.data(),
                                  mpi_type(dtype), comm_));
      return;
    }
    // Each owner r broadcasts its block straight into everyone's recv.
    int64_t displ = 0;
    for (int r = 0; r < size_; ++r) {
      const int64_t n_r = counts[static_cast<size_t>(r)];
      if (r == rank_ && n_r > 0)
        std::memcpy(at(recv, displ, dtype), send, static_cast<size_t>(n_r) * dtype_size(dtype));
      for_each_chunk(n_r, [&](int64_t off, int n) {
        SP_MPI_CHECK(MPI_Bcast(at(recv, displ + off, dtype), n, mpi_type(dtype), r, comm_));
      });
      displ += n_r;
    }
  }

  void all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                  std::span<const int64_t> recv_counts, DType dtype) override {
    std::vector<MPI_Request> requests = post_all_to_all(send, send_counts, recv, recv_counts, dtype);
    if (!requests.empty())
      SP_MPI_CHECK(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
  }

  // Non-blocking collectives: one MPI-3 call each where the counts fit one call; above max_count the
  // blocking split path runs and the request returned is complete (all_reduce and all_to_all split into
  // several requests instead, so they overlap at any size).
  std::unique_ptr<Request> iall_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    check_reduce(count, dtype, "iall_reduce");
    std::vector<MPI_Request> requests;
    for_each_chunk(count, [&](int64_t off, int n) {
      requests.emplace_back();
      SP_MPI_CHECK(
          MPI_Iallreduce(MPI_IN_PLACE, at(data, off, dtype), n, mpi_type(dtype), mpi_op(op), comm_, &requests.back()));
    });
    return std::make_unique<MpiRequest>(std::move(requests));
  }

  std::unique_ptr<Request> ireduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType dtype,
                                           ReduceOp op) override {
    const int64_t total = check_counts(counts, "ireduce_scatter");
    check_reduce(total, dtype, "ireduce_scatter");
    if (total > max_count_) return Communicator::ireduce_scatter(send, recv, counts, dtype, op);
    std::vector<int> c = to_int(counts);
    std::vector<MPI_Request> requests(1);
    SP_MPI_CHECK(MPI_Ireduce_scatter(send, recv, c.data(), mpi_type(dtype), mpi_op(op), comm_, &requests[0]));
    std::vector<std::vector<int>> arrays;
    arrays.push_back(std::move(c));
    return std::make_unique<MpiRequest>(std::move(requests), std::move(arrays));
  }

  std::unique_ptr<Request> iall_gather(const void* send, void* recv, std::span<const int64_t> counts,
                                       DType dtype) override {
    const int64_t total = check_counts(counts, "iall_gather");
    if (total > max_count_) return Communicator::iall_gather(send, recv, counts, dtype);
    std::vector<int> c = to_int(counts);
    std::vector<int> d = displacements(c);
    std::vector<MPI_Request> requests(1);
    SP_MPI_CHECK(MPI_Iallgatherv(send, c[static_cast<size_t>(rank_)], mpi_type(dtype), recv, c.data(), d.data(),
                                 mpi_type(dtype), comm_, &requests[0]));
    std::vector<std::vector<int>> arrays;
    arrays.push_back(std::move(c));
    arrays.push_back(std::move(d));
    return std::make_unique<MpiRequest>(std::move(requests), std::move(arrays));
  }

  std::unique_ptr<Request> iall_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                                       std::span<const int64_t> recv_counts, DType dtype) override {
    return std::make_unique<MpiRequest>(post_all_to_all(send, send_counts, recv, recv_counts, dtype));
  }

  void broadcast(void* data, int64_t count, DType dtype, int root) override {
    check_count(count, "broadcast");
    check_peer(root, "broadcast root");
    for_each_chunk(count, [&](int64_t off, int n) {
      SP_MPI_CHECK(MPI_Bcast(at(data, off, dtype), n, mpi_type(dtype), root, comm_));
    });
  }

  void gather(const void* send, int64_t count, void* recv, std::span<const int64_t> counts, DType dtype,
              int root) override {
    const int64_t total = check_counts(counts, "gather");
    check_peer(root, "gather root");
    SP_CHECK_EQ(count, counts[static_cast<size_t>(rank_)], "gather on '{}': count must equal counts[rank {}]", name_,
                rank_);
    if (total <= max_count_) {
      const std::vector<int> c = to_int(counts);
      const std::vector<int> d = displacements(c);
      SP_MPI_CHECK(MPI_Gatherv(send, static_cast<int>(count), mpi_type(dtype), recv, c.data(), d.data(),
                               mpi_type(dtype), root, comm_));
      return;
    }
    if (rank_ != root) {
      std::vector<MPI_Request> requests;
      for_each_chunk(count, [&](int64_t off, int n) {
        requests.emplace_back();
        SP_MPI_CHECK(MPI_Isend(at(send, off, dtype), n, mpi_type(dtype), root, 1, internal_, &requests.back()));
      });
      if (!requests.empty())
        SP_MPI_CHECK(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
      return;
    }
    std::vector<MPI_Request> requests;
    int64_t displ = 0;
    for (int r = 0; r < size_; ++r) {
      const int64_t n_r = counts[static_cast<size_t>(r)];
      if (r == rank_ && n_r > 0)
        std::memcpy(at(recv, displ, dtype), send, static_cast<size_t>(n_r) * dtype_size(dtype));
      if (r != rank_) {
        for_each_chunk(n_r, [&](int64_t off, int n) {
          requests.emplace_back();
          SP_MPI_CHECK(MPI_Irecv(at(recv, displ + off, dtype), n, mpi_type(dtype), r, 1, internal_, &requests.back()));
        });
      }
      displ += n_r;
    }
    if (!requests.empty())
      SP_MPI_CHECK(MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE));
  }

  void send(const void* data, int64_t count, DType dtype, int peer, int tag) override {
    check_p2p(count, peer, tag, "send");
    for_each_chunk(count, [&](int64_t off, int n) {
      SP_MPI_CHECK(MPI_Send(at(data, off, dtype), n, mpi_type(dtype), peer, tag, comm_));
    });
  }

  void recv(void* data, int64_t count, DType dtype, int peer, int tag) override {
    check_p2p(count, peer, tag, "recv");
    for_each_chunk(count, [&](int64_t off, int n) {
      SP_MPI_CHECK(MPI_Recv(at(data, off, dtype), n, mpi_type(dtype), peer, tag, comm_, MPI_STATUS_IGNORE));
    });
  }

  std::unique_ptr<Request> isend(const void* data, int64_t count, DType dtype, int peer, int tag) override {
    check_p2p(count, peer, tag, "isend");
    std::vector<MPI_Request> requests;
    for_each_chunk(count, [&](int64_t off, int n) {
      requests.emplace_back();
      SP_MPI_CHECK(MPI_Isend(at(data, off, dtype), n, mpi_type(dtype), peer, tag, comm_, &requests.back()));
    });
    return std::make_unique<MpiRequest>(std::move(requests));
  }

  std::unique_ptr<Request> irecv(void* data, int64_t count, DType dtype, int peer, int tag) override {
    check_p2p(count, peer, tag, "irecv");
    std::vector<MPI_Request> requests;
    for_each_chunk(count, [&](int64_t off, int n) {
      requests.emplace_back();
      SP_MPI_CHECK(MPI_Irecv(at(data, off, dtype), n, mpi_type(dtype), peer, tag, comm_, &requests.back()));
    });
    return std::make_unique<MpiRequest>(std::move(requests));
  }

  void barrier() override { SP_MPI_CHECK(MPI_Barrier(comm_)); }

 private:
  // Linear exchange: copies the block to itself, posts every receive, then every send (valid for any count);
  // the caller waits. On the private duplicate, tag 0: MPI matches a pair's messages in posting order, so
  // exchanges in flight together (blocking or not) never mix, as every member posts them in the same order.
  std::vector<MPI_Request> post_all_to_all(const void* send, std::span<const int64_t> send_counts, void* recv,
                                           std::span<const int64_t> recv_counts, DType dtype) {
    check_counts(send_counts, "all_to_all send");
    check_counts(recv_counts, "all_to_all recv");
    SP_CHECK_EQ(send_counts[static_cast<size_t>(rank_)], recv_counts[static_cast<size_t>(rank_)],
                "all_to_all on '{}': the block a rank sends to itself must equal the block it receives", name_);
    std::vector<MPI_Request> requests;
    int64_t send_displ = 0, recv_displ = 0;
    for (int q = 0; q < size_; ++q) {
      const int64_t ns = send_counts[static_cast<size_t>(q)], nr = recv_counts[static_cast<size_t>(q)];
      if (q == rank_) {
        if (ns > 0)
          std::memcpy(at(recv, recv_displ, dtype), at(send, send_displ, dtype),
                      static_cast<size_t>(ns) * dtype_size(dtype));
      } else {
        for_each_chunk(nr, [&](int64_t off, int n) {
          requests.emplace_back();
          SP_MPI_CHECK(
              MPI_Irecv(at(recv, recv_displ + off, dtype), n, mpi_type(dtype), q, 0, internal_, &requests.back()));
        });
        for_each_chunk(ns, [&](int64_t off, int n) {
          requests.emplace_back();
          SP_MPI_CHECK(
              MPI_Isend(at(send, send_displ + off, dtype), n, mpi_type(dtype), q, 0, internal_, &requests.back()));
        });
      }
      send_displ += ns;
      recv_displ += nr;
    }
    return requests;
  }

  template <typename F>
  void for_each_chunk(int64_t count, F&& f) const {
    for (int64_t off = 0; off < count; off += max_count_) f(off, static_cast<int>(std::min(max_count_, count - off)));
  }

  void check_count(int64_t count, const char* what) const {
    SP_CHECK(count >= 0, "{} on '{}': negative count {}", what, name_, count);
  }
  void check_reduce(int64_t count, DType dtype, const char* what) const {
    check_count(count, what);
    SP_CHECK(reducible(dtype), "{} on '{}': cannot reduce dtype {} (numeric dtypes only)", what, name_,
             dtype_name(dtype));
  }
  void check_peer(int peer, const char* what) const {
    SP_CHECK(peer >= 0 && peer < size_, "{} {} is not a rank of group '{}' (size {})", what, peer, name_, size_);
  }
  void check_p2p(int64_t count, int peer, int tag, const char* what) const {
    check_count(count, what);
    check_peer(peer, what);
    SP_CHECK(tag >= 0 && tag <= kMaxTag, "{} on '{}': tag {} outside [0, {}]", what, name_, tag, kMaxTag);
  }
  // Returns Σcounts.
  int64_t check_counts(std::span<const int64_t> counts, const char* what) const {
    SP_CHECK_EQ(static_cast<int64_t>(counts.size()), static_cast<int64_t>(size_), "{} on '{}': one count per rank",
                what, name_);
    int64_t total = 0;
    for (int64_t c : counts) {
      check_count(c, what);
      total += c;
    }
    return total;
  }
  static std::vector<int> to_int(std::span<const int64_t> counts) {
    return std::vector<int>(counts.begin(), counts.end());  // callers checked Σcounts ≤ max_count
  }
  static std::vector<int> displacements(const std::vector<int>& counts) {
    std::vector<int> d(counts.size(), 0);
    for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
    return d;
  }

  MPI_Comm comm_;
  MPI_Comm internal_ = MPI_COMM_NULL;  // private duplicate for p2p-implemented collectives
  std::string name_;
  int64_t max_count_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> world_ranks_;
};

}  // namespace

std::unique_ptr<Communicator> wrap_mpi_comm(MPI_Comm comm, std::string name, const MpiCommOptions& options) {
  return std::make_unique<MpiCommunicator>(comm, std::move(name), options);
}

}  // namespace sp::comm
