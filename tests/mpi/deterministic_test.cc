// deterministic_all_reduce / deterministic_reduce_scatter against the canonical tree sum computed
// locally: every rank regenerates every member's input (Philox, a pure function of (group rank, i)),
// sums them with kernels::canonical_tree_sum_inplace in group-rank order, and requires its result
// to equal that, bit for bit. Equality with a value each rank computes alone also proves the result
// is bit-identical on all ranks. Counts are uneven, smaller than the group, and zero.
#include "comm/deterministic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "comm/mpi_communicator.h"
#include "core/rng.h"
#include "kernels/reduce.h"
#include "mpi_test_util.h"
#include "tensor/float16.h"

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
  std::vector<BufView> ptrs;
  for (int q = 0; q < n; ++q) leaves.push_back(input_of(q, count, salt));
  for (auto& l : leaves) ptrs.push_back(f32_view(l.data(), count));
  kernels::canonical_tree_sum_inplace(ptrs);
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
    deterministic_all_reduce(c, f32_view(x.data(), count), f32_view(scratch.data(), std::ssize(scratch)));
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
    deterministic_reduce_scatter(c, f32_view(send.data(), count), f32_view(mine.data(), std::ssize(mine)), counts,
                                 f32_view(rs_scratch.data(), std::ssize(rs_scratch)));
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

// 16-bit buffers (mixed precision's 16-bit gradients): the same tree with a rounding per node, equal
// to kernels::canonical_tree_sum_inplace of 16-bit leaves over the members' inputs (rounded to the format first).
TEST(Deterministic16, EqualsCanonicalTreeSum16OnEveryRank) {
  auto world = make_world_communicator();
  const int n = world->size(), r = world->rank();
  for (DType t : {DType::kBF16, DType::kF16}) {
    const int64_t count = 1001;
    auto as16 = [&](int q) {
      std::vector<uint16_t> x(static_cast<size_t>(count));
      float16_from_f32(x.data(), input_of(q, count, 77).data(), count, t);
      return x;
    };
    std::vector<std::vector<uint16_t>> leaves;
    std::vector<BufView> ptrs;
    for (int q = 0; q < n; ++q) leaves.push_back(as16(q));
    for (auto& l : leaves) ptrs.push_back({l.data(), count, t});
    kernels::canonical_tree_sum_inplace(ptrs);
    const std::vector<uint16_t>& want = leaves[0];
    std::vector<uint16_t> x = as16(r);
    std::vector<uint16_t> scratch(static_cast<size_t>(deterministic_all_reduce_scratch(count, n)));
    deterministic_all_reduce(*world, {x.data(), count, t}, {scratch.data(), std::ssize(scratch), t});
    EXPECT_EQ(x, want) << dtype_name(t) << " all_reduce";
    const std::vector<int64_t> counts = even_split_counts(count, n);
    int64_t displ = 0;
    for (int q = 0; q < r; ++q) displ += counts[static_cast<size_t>(q)];
    std::vector<uint16_t> mine(static_cast<size_t>(counts[static_cast<size_t>(r)]));
    const std::vector<uint16_t> send = as16(r);
    deterministic_reduce_scatter(*world, {send.data(), count, t}, {mine.data(), std::ssize(mine), t}, counts,
                                 {scratch.data(), std::ssize(scratch), t});
    EXPECT_TRUE(std::equal(mine.begin(), mine.end(), want.begin() + displ)) << dtype_name(t) << " reduce_scatter";
    // A 16-bit sum rounds at every node: it differs from the fp32 tree rounded once (the test can tell).
    if (n == 4) {
      std::vector<std::vector<float>> wide;
      std::vector<BufView> wp;
      for (int q = 0; q < n; ++q) {
        wide.emplace_back(static_cast<size_t>(count));
        f32_from_float16(wide.back().data(), as16(q).data(), count, t);
      }
      for (auto& w : wide) wp.push_back(f32_view(w.data(), count));
      kernels::canonical_tree_sum_inplace(wp);
      std::vector<uint16_t> once(static_cast<size_t>(count));
      float16_from_f32(once.data(), wide[0].data(), count, t);
      EXPECT_NE(once, want) << "inputs too tame to tell a per-node rounding from a single one";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(MaxCount, Deterministic, ::testing::Values(int64_t{INT_MAX}, int64_t{5}),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return info.param == 5 ? std::string("Split5") : std::string("MpiLimit");
                         });

}  // namespace
}  // namespace sp::comm
