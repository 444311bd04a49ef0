// Every Communicator op on the world and on each axis group of several grids, against closed forms:
// rank r contributes (r+1)·(i+1) at element i, so sum = n(n+1)/2·(i+1), max = n·(i+1), min = i+1;
// gathers and all_to_all carry values that encode (sender, receiver, index). Each grid runs twice:
// with MPI's int limit and with max_count = 3, which forces every op through its split path (the
// one counts above 2^31 − 1 take) without allocating gigabytes. Also: the grid communicators'
// names, ranks and members equal ProcessGrid's, and write_topology produces a valid topology.json.
// The non-blocking collectives (iall_reduce, ireduce_scatter, iall_gather, iall_to_all) are posted together,
// several in flight at once, and must give the blocking ops' closed forms.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>

#include "comm/mpi_communicator.h"
#include "comm/topology.h"
#include "core/file_io.h"
#include "mpi_test_util.h"

namespace sp::comm {
namespace {

template <typename T>
void check_all_reduce(Communicator& c, DType dtype) {
  const int n = c.size(), r = c.rank();
  const int count = 7;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    std::vector<T> x(count);
    for (int i = 0; i < count; ++i) x[static_cast<size_t>(i)] = static_cast<T>((r + 1) * (i + 1));
    c.all_reduce(x.data(), count, dtype, op);
    for (int i = 0; i < count; ++i) {
      const int64_t k = i + 1;
      const int64_t want = op == ReduceOp::kSum ? int64_t{n} * (n + 1) / 2 * k : op == ReduceOp::kMax ? n * k : k;
      EXPECT_EQ(x[static_cast<size_t>(i)], static_cast<T>(want))
          << c.name() << " " << dtype_name(dtype) << " " << reduce_op_name(op) << " i=" << i;
    }
  }
}

std::vector<int64_t> displs_of(const std::vector<int64_t>& counts) {
  std::vector<int64_t> d(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

void exercise(Communicator& c) {
  const int n = c.size(), r = c.rank();
  SCOPED_TRACE(c.name());
  check_all_reduce<float>(c, DType::kF32);
  check_all_reduce<double>(c, DType::kF64);
  check_all_reduce<int32_t>(c, DType::kI32);
  check_all_reduce<int64_t>(c, DType::kI64);
  check_all_reduce<uint64_t>(c, DType::kU64);
  c.all_reduce(nullptr, 0, DType::kF32, ReduceOp::kSum);  // empty is fine

  // reduce_scatter with uneven counts (rank q owns q+1 elements, plus a zero-length owner when n > 1).
  std::vector<int64_t> counts(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) counts[static_cast<size_t>(q)] = q == 1 ? 0 : q + 2;
  const std::vector<int64_t> displ = displs_of(counts);
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  std::vector<double> send(static_cast<size_t>(total));
  for (int64_t j = 0; j < total; ++j) send[static_cast<size_t>(j)] = static_cast<double>((r + 1) * (j + 1));
  std::vector<double> mine(static_cast<size_t>(counts[static_cast<size_t>(r)]) + 1, -1.0);
  c.reduce_scatter(send.data(), mine.data(), counts, DType::kF64, ReduceOp::kSum);
  for (int64_t k = 0; k < counts[static_cast<size_t>(r)]; ++k)
    EXPECT_EQ(mine[static_cast<size_t>(k)],
              n * (n + 1) / 2.0 * static_cast<double>(displ[static_cast<size_t>(r)] + k + 1));
  EXPECT_EQ(mine.back(), -1.0) << "reduce_scatter wrote past counts[rank]";

  // all_gather: rank q's block holds 100q + k; the result is every block in rank order.
  std::vector<int32_t> block(static_cast<size_t>(counts[static_cast<size_t>(r)]));
  for (size_t k = 0; k < block.size(); ++k) block[k] = 100 * r + static_cast<int32_t>(k);
  std::vector<int32_t> gathered(static_cast<size_t>(total), -1);
  c.all_gather(block.data(), gathered.data(), counts, DType::kI32);
  for (int q = 0; q < n; ++q)
    for (int64_t k = 0; k < counts[static_cast<size_t>(q)]; ++k)
      EXPECT_EQ(gathered[static_cast<size_t>(displ[static_cast<size_t>(q)] + k)], 100 * q + k);

  // all_to_all: rank a sends f(a, b) = (a + 2b) % 3 elements 1000a + 10b + k to rank b.
  auto f = [](int a, int b) { return static_cast<int64_t>((a + 2 * b) % 3); };
  std::vector<int64_t> sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) {
    sc[static_cast<size_t>(q)] = f(r, q);
    rc[static_cast<size_t>(q)] = f(q, r);
  }
  std::vector<float> a2a_send, a2a_recv(static_cast<size_t>(std::accumulate(rc.begin(), rc.end(), int64_t{0})), -1.0f);
  for (int q = 0; q < n; ++q)
    for (int64_t k = 0; k < f(r, q); ++k) a2a_send.push_back(static_cast<float>(1000 * r + 10 * q + k));
  c.all_to_all(a2a_send.data(), sc, a2a_recv.data(), rc, DType::kF32);
  size_t at = 0;
  for (int q = 0; q < n; ++q)
    for (int64_t k = 0; k < f(q, r); ++k) EXPECT_EQ(a2a_recv[at++], static_cast<float>(1000 * q + 10 * r + k));

  // broadcast and gather from every root.
  for (int root = 0; root < n; ++root) {
    std::vector<uint8_t> b(9, static_cast<uint8_t>(r == root ? 0 : 0xEE));
    if (r == root)
      for (size_t k = 0; k < b.size(); ++k) b[k] = static_cast<uint8_t>(root * 16 + static_cast<int>(k));
    c.broadcast(b.data(), static_cast<int64_t>(b.size()), DType::kU8, root);
    for (size_t k = 0; k < b.size(); ++k) EXPECT_EQ(b[k], static_cast<uint8_t>(root * 16 + static_cast<int>(k)));

    std::vector<int64_t> gc(static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) gc[static_cast<size_t>(q)] = q + 1;
    const std::vector<int64_t> gd = displs_of(gc);
    std::vector<int64_t> mine64(static_cast<size_t>(r + 1));
    for (int k = 0; k <= r; ++k) mine64[static_cast<size_t>(k)] = 10 * r + k;
    std::vector<int64_t> all(r == root ? static_cast<size_t>(n * (n + 1) / 2) : 0, -1);
    c.gather(mine64.data(), r + 1, r == root ? all.data() : nullptr, gc, DType::kI64, root);
    if (r == root) {
      for (int q = 0; q < n; ++q)
        for (int k = 0; k <= q; ++k) EXPECT_EQ(all[static_cast<size_t>(gd[static_cast<size_t>(q)] + k)], 10 * q + k);
    }
  }

  // Non-blocking collectives: the same four ops posted together (all in flight at once, two all_reduces
  // among them), completed in reverse order, one by test() polling: the same closed forms as above.
  {
    std::vector<float> xa(7), xb(5);
    for (int i = 0; i < 7; ++i) xa[static_cast<size_t>(i)] = static_cast<float>((r + 1) * (i + 1));
    for (int i = 0; i < 5; ++i) xb[static_cast<size_t>(i)] = static_cast<float>(r + 1);
    std::vector<double> rs(static_cast<size_t>(counts[static_cast<size_t>(r)]) + 1, -1.0);
    std::vector<int32_t> ag(static_cast<size_t>(total), -1);
    std::vector<float> a2a(a2a_recv.size(), -1.0f);
    auto q1 = c.iall_reduce(xa.data(), 7, DType::kF32, ReduceOp::kSum);
    auto q2 = c.ireduce_scatter(send.data(), rs.data(), counts, DType::kF64, ReduceOp::kSum);
    auto q3 = c.iall_gather(block.data(), ag.data(), counts, DType::kI32);
    auto q4 = c.iall_to_all(a2a_send.data(), sc, a2a.data(), rc, DType::kF32);
    auto q5 = c.iall_reduce(xb.data(), 5, DType::kF32, ReduceOp::kMax);
    while (!q5->test()) {
    }
    EXPECT_TRUE(q5->test());  // complete stays complete
    q4->wait();
    q3->wait();
    q2->wait();
    q1->wait();
    q1->wait();  // idempotent
    for (int i = 0; i < 7; ++i)
      EXPECT_EQ(xa[static_cast<size_t>(i)], static_cast<float>(n * (n + 1) / 2 * (i + 1))) << "iall_reduce i=" << i;
    for (int i = 0; i < 5; ++i) EXPECT_EQ(xb[static_cast<size_t>(i)], static_cast<float>(n)) << "iall_reduce max";
    for (int64_t k = 0; k < counts[static_cast<size_t>(r)]; ++k)
      EXPECT_EQ(rs[static_cast<size_t>(k)],
                n * (n + 1) / 2.0 * static_cast<double>(displ[static_cast<size_t>(r)] + k + 1));
    EXPECT_EQ(rs.back(), -1.0) << "ireduce_scatter wrote past counts[rank]";
    EXPECT_EQ(ag, gathered) << "iall_gather";
    EXPECT_EQ(a2a, a2a_recv) << "iall_to_all";
  }

  // Non-blocking ring (works for n = 1: a message to oneself).
  std::vector<double> out(5), in(5, -1.0);
  for (int k = 0; k < 5; ++k) out[static_cast<size_t>(k)] = 10.0 * r + k;
  auto rq = c.irecv(in.data(), 5, DType::kF64, (r + n - 1) % n, 11);
  auto sq = c.isend(out.data(), 5, DType::kF64, (r + 1) % n, 11);
  rq->wait();
  sq->wait();
  sq->wait();  // idempotent
  for (int k = 0; k < 5; ++k) EXPECT_EQ(in[static_cast<size_t>(k)], 10.0 * ((r + n - 1) % n) + k);

  // Blocking pairs (r, r^1): the even rank sends first.
  const int partner = r ^ 1;
  if (partner < n) {
    std::vector<int16_t> s(6), got(6, -1);
    for (int k = 0; k < 6; ++k) s[static_cast<size_t>(k)] = static_cast<int16_t>(r * 7 + k);
    if (r % 2 == 0) {
      c.send(s.data(), 6, DType::kI16, partner, 3);
      c.recv(got.data(), 6, DType::kI16, partner, 3);
    } else {
      c.recv(got.data(), 6, DType::kI16, partner, 3);
      c.send(s.data(), 6, DType::kI16, partner, 3);
    }
    for (int k = 0; k < 6; ++k) EXPECT_EQ(got[static_cast<size_t>(k)], partner * 7 + k);
  }
  c.barrier();
}

class Collectives : public ::testing::TestWithParam<int64_t> {};

TEST_P(Collectives, EveryOpOnEveryGroupOfEveryGrid) {
  MpiCommOptions options;
  options.max_count = GetParam();
  auto probe = make_world_communicator();
  for (const auto& [dp, tp, pp] : test::grids_for_world(probe->size())) {
    SCOPED_TRACE(test::grid_label({dp, tp, pp}));
    const ProcessGrid grid = *ProcessGrid::create(dp, tp, pp, ProcessGrid::kDefaultOrder, probe->size());
    GridCommunicators comms = make_grid_communicators(grid, options);
    const int me = comms.world->rank();
    EXPECT_EQ(comms.world->name(), "world");
    EXPECT_EQ(comms.world->size(), grid.world_size());
    for (Axis a : kAllAxes) {
      Communicator& c = comms.axis(a);
      EXPECT_EQ(c.name(), grid.group_name(a, me));
      EXPECT_EQ(c.rank(), grid.coords_of(me)[a]);
      EXPECT_EQ(c.size(), grid.size(a));
      const std::vector<int> members = grid.group_of(a, me);
      EXPECT_TRUE(std::equal(members.begin(), members.end(), c.world_ranks().begin(), c.world_ranks().end()));
    }
    exercise(*comms.world);
    for (Axis a : kAllAxes) exercise(comms.axis(a));
  }
}

INSTANTIATE_TEST_SUITE_P(MaxCount, Collectives, ::testing::Values(int64_t{INT_MAX}, int64_t{3}),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return info.param == 3 ? std::string("Split3") : std::string("MpiLimit");
                         });

TEST(Topology, EveryRankReportedAndValid) {
  auto world = make_world_communicator();
  const int n = world->size();
  const std::string dir = test::shared_temp_dir(*world, "topology");
  const ProcessGrid grid = *ProcessGrid::create(test::grids_for_world(n).back()[0], test::grids_for_world(n).back()[1],
                                                test::grids_for_world(n).back()[2], "pp-tp-dp", n);
  const Status s = write_topology(*world, grid, dir);
  EXPECT_TRUE(s.ok()) << s.to_string();
  if (world->rank() == 0) {
    const nlohmann::json t = nlohmann::json::parse(*read_file(dir + "/topology.json"));
    EXPECT_TRUE(validate_topology(t).ok()) << validate_topology(t).to_string();
    EXPECT_EQ(t["world_size"], n);
    EXPECT_EQ(t["axis_order"], "pp-tp-dp");
    std::set<int64_t> pids;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(t["ranks"][r]["world_rank"], r);
      pids.insert(t["ranks"][r]["pid"].get<int64_t>());
      EXPECT_FALSE(t["ranks"][r]["cpu_affinity"].empty());
    }
    EXPECT_EQ(static_cast<int>(pids.size()), n) << "one process per rank";
  }
  // A write failure on rank 0 is reported on every rank.
  const Status bad = write_topology(*world, grid, "/proc/no_such_dir/run");
  EXPECT_FALSE(bad.ok());
  if (world->rank() == 0) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sp::comm
