// deterministic_all_reduce / deterministic_reduce_scatter against the canonical tree sum computed
// locally: every rank regenerates every member's input (Philox, a pure function of (group rank, i)),
// sums them with kernels::canonical_tree_sum_inplace in group-rank order, and requires its result
// to equal that, bit for bit. Equality with a value each rank computes alone also proves the result
// is bit-identical on all ranks. Counts are uneven, smaller than the group, and zero.
#include "comm/deterministic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "comm/mpi_communicator.h"
#include "core/rng.h"
#include "kernels/reduce.h"
#include "mpi_test_util.h"

namespace sp::comm {
namespace {

// Member q's contribution: normals of different magnitudes, so summation order changes the bits.
std::vector<float> input_of(int q, int64_t count, int salt) {
  const PhiloxKey key = philox_key(1234 + static_cast<uint64_t>(salt), "deterministic_test");
  std::vector<float> x(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    x[static_cast<size_t>(i)] =
        static_cast<float>(random_normal(key, static_cast<uint64_t>(i), static_cast<uint32_t>(q)) *
                           std::ldexp(1.0, static_cast<int>(i % 17) - 8));
  return x;
}

std::vector<float> canonical_sum(int n, int64_t count, int salt) {
  std::vector<std::vector<float>> leaves;
  std::vector<float*> ptrs;
  for (int q = 0; q < n; ++q) leaves.push_back(input_of(q, count, salt));
  for (auto& l : leaves) ptrs.push_back(l.data());
  kernels::canonical_tree_sum_inplace(ptrs.data(), n, count);
  return leaves[0];
}

bool same_bits(const float* a, const float* b, int64_t n) {
  return n == 0 || std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

void check_group(Communicator& c, int salt) {
  const int n = c.size(), r = c.rank();
  SCOPED_TRACE(c.name());
  for (int64_t count : {int64_t{1001}, int64_t{n > 1 ? n - 1 : 0}, int64_t{0}, int64_t{64}}) {
    // all_reduce in place.
    std::vector<float> x = input_of(r, count, salt);
    std::vector<float> scratch(static_cast<size_t>(deterministic_all_reduce_scratch(count, n)));
    deterministic_all_reduce(c, x.data(), count, scratch.data());
    const std::vector<float> want = canonical_sum(n, count, salt);
    EXPECT_TRUE(same_bits(x.data(), want.data(), count)) << "all_reduce count " << count;

    // reduce_scatter with uneven ownership: rank q owns (q + 1) · count / n elements, remainder last.
    std::vector<int64_t> counts(static_cast<size_t>(n));
    int64_t assigned = 0;
    for (int q = 0; q < n; ++q) {
      counts[static_cast<size_t>(q)] =
          q + 1 < n ? std::min<int64_t>(count - assigned, (q + 1) * count / (n * 2)) : count - assigned;
      assigned += counts[static_cast<size_t>(q)];
    }
    int64_t displ = 0;
    for (int q = 0; q < r; ++q) displ += counts[static_cast<size_t>(q)];
    const std::vector<float> send = input_of(r, count, salt);
    std::vector<float> mine(static_cast<size_t>(counts[static_cast<size_t>(r)]));
    std::vector<float> rs_scratch(static_cast<size_t>(deterministic_reduce_scatter_scratch(counts, r)));
    deterministic_reduce_scatter(c, send.data(), mine.data(), counts, rs_scratch.data());
    EXPECT_TRUE(same_bits(mine.data(), want.data() + displ, counts[static_cast<size_t>(r)]))
        << "reduce_scatter count " << count;
  }
  // The test can tell orders apart: for 4 leaves the left-to-right sum differs from the tree.
  if (n == 4) {
    const std::vector<float> tree = canonical_sum(n, 1001, salt);
    std::vector<float> seq = input_of(0, 1001, salt);
    for (int q = 1; q < n; ++q) {
      const std::vector<float> x = input_of(q, 1001, salt);
      for (size_t i = 0; i < seq.size(); ++i) seq[i] += x[i];
    }
    EXPECT_FALSE(same_bits(tree.data(), seq.data(), 1001)) << "inputs too tame to detect a wrong order";
  }
}

class Deterministic : public ::testing::TestWithParam<int64_t> {};

TEST_P(Deterministic, EqualsCanonicalTreeSumOnEveryRank) {
  MpiCommOptions options;
  options.max_count = GetParam();
  auto probe = make_world_communicator();
  int salt = 0;
  for (const auto& [dp, tp, pp] : test::grids_for_world(probe->size())) {
    SCOPED_TRACE(test::grid_label({dp, tp, pp}));
    const ProcessGrid grid = *ProcessGrid::create(dp, tp, pp, ProcessGrid::kDefaultOrder, probe->size());
    GridCommunicators comms = make_grid_communicators(grid, options);
    check_group(*comms.world, ++salt);
    for (Axis a : kAllAxes) check_group(comms.axis(a), ++salt);
  }
}

INSTANTIATE_TEST_SUITE_P(MaxCount, Deterministic, ::testing::Values(int64_t{INT_MAX}, int64_t{5}),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return info.param == 5 ? std::string("Split5") : std::string("MpiLimit");
                         });

}  // namespace
}  // namespace sp::comm
