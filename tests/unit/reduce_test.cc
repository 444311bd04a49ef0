// The canonical reduction order (kernels/reduce.h): tree shape by closed form, streaming ==
// recursive, and the property DP relies on: the dp-block sums combined over the tree over dp
// leaves are bitwise the single-device sum, whenever the block size is a power of two.
#include "kernels/reduce.h"

#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <vector>

#include "tensor/float16.h"
#include "unity_id.h"

namespace sp::kernels {
namespace {
namespace SP_TEST_ID {

// Values spanning many binades so that any change of summation order changes the bits.
std::vector<std::vector<float>> random_leaves(int n_leaves, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 20);
  std::vector<std::vector<float>> v(static_cast<size_t>(n_leaves), std::vector<float>(static_cast<size_t>(n)));
  for (auto& leaf : v)
    for (float& x : leaf) x = std::ldexp(mant(rng), expo(rng));
  return v;
}

std::vector<float> tree_sum(std::vector<std::vector<float>> leaves) {
  std::vector<BufView> p;
  for (auto& l : leaves) p.push_back(f32_view(l.data(), std::ssize(l)));
  canonical_tree_sum_inplace(p);
  return leaves[0];
}

TEST(CanonicalTree, SplitRuleClosedForm) {
  EXPECT_EQ(canonical_split(0, 2), 1);
  EXPECT_EQ(canonical_split(0, 6), 4);
  EXPECT_EQ(canonical_split(0, 8), 4);
  EXPECT_EQ(canonical_split(0, 9), 8);
  EXPECT_EQ(canonical_split(4, 7), 6);
}

TEST(CanonicalTree, SixLeavesMatchTheDocumentedParenthesization) {
  auto l = random_leaves(6, 64, 1);
  const std::vector<float> got = tree_sum(l);
  for (int i = 0; i < 64; ++i) {
    const float want = ((l[0][i] + l[1][i]) + (l[2][i] + l[3][i])) + (l[4][i] + l[5][i]);
    ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want)) << i;
  }
}

TEST(CanonicalTree, OrderActuallyMatters) {
  // Guard against a vacuous test: a left fold of the same leaves differs somewhere.
  auto l = random_leaves(6, 256, 2);
  const std::vector<float> got = tree_sum(l);
  int differ = 0;
  for (int i = 0; i < 256; ++i) {
    float fold = l[0][i];
    for (int j = 1; j < 6; ++j) fold += l[j][i];
    differ += std::bit_cast<uint32_t>(fold) != std::bit_cast<uint32_t>(got[i]);
  }
  EXPECT_GT(differ, 0);
}

TEST(CanonicalAccumulator, StreamingEqualsRecursiveForEveryCount) {
  for (int n_leaves = 1; n_leaves <= 33; ++n_leaves) {
    auto l = random_leaves(n_leaves, 32, 100 + n_leaves);
    const std::vector<float> want = tree_sum(l);
    auto copy = l;
    CanonicalAccumulator acc(32);
    int64_t peak = 0;
    for (auto& leaf : copy) {
      acc.push(f32_view(leaf.data(), 32));
      peak = std::max(peak, acc.depth());
    }
    std::vector<BufView> freed;
    const float* got = acc.finish(freed).f32();
    for (int i = 0; i < 32; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << n_leaves << " leaves, " << i;
    // Depth right after a push, before merges, is popcount(j-1)+1: the ledger model's formula.
    EXPECT_LE(peak, canonical_accumulator_peak_buffers(n_leaves));
  }
}

TEST(CanonicalAccumulator, PeakBuffersFormula) {
  EXPECT_EQ(canonical_accumulator_peak_buffers(1), 1);
  EXPECT_EQ(canonical_accumulator_peak_buffers(2), 2);
  EXPECT_EQ(canonical_accumulator_peak_buffers(4), 3);
  EXPECT_EQ(canonical_accumulator_peak_buffers(8), 4);
  EXPECT_EQ(canonical_accumulator_peak_buffers(7), 3);
}

TEST(CanonicalTree, PowerOfTwoBlocksComposeBitwise) {
  // dp ranks each sum a block of k = 2^a consecutive leaves; the tree over the dp block sums must
  // reproduce the tree over all dp·k leaves, for any dp (docs/equivalence.md).
  for (int k : {1, 2, 4, 8}) {
    for (int dp : {1, 2, 3, 4, 5, 6}) {
      auto l = random_leaves(dp * k, 48, 7 * k + dp);
      const std::vector<float> want = tree_sum(l);
      std::vector<std::vector<float>> blocks;
      for (int r = 0; r < dp; ++r)
        blocks.push_back(tree_sum(std::vector<std::vector<float>>(l.begin() + r * k, l.begin() + (r + 1) * k)));
      const std::vector<float> got = tree_sum(blocks);
      for (int i = 0; i < 48; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << "k=" << k << " dp=" << dp;
    }
  }
}

// 16-bit leaves (mixed precision's 16-bit gradients): the view's dtype picks the loop. Every node is the
// fp32 sum of its widened children rounded once, so the tree equals that composition written out here,
// streaming equals recursive, and it differs from the fp32 tree rounded once at the end (the test can tell).
TEST(CanonicalTree, SixteenBitLeavesRoundEveryNode) {
  for (DType t : {DType::kBF16, DType::kF16}) {
    const auto l = random_leaves(6, 256, 5);
    std::vector<std::vector<uint16_t>> h(6, std::vector<uint16_t>(256));
    for (int j = 0; j < 6; ++j) float16_from_f32(h[j].data(), l[j].data(), 256, t);
    auto w = [&](int j, int i) { return t == DType::kBF16 ? f32_from_bf16(h[j][i]) : f32_from_f16(h[j][i]); };
    auto r = [&](float x) {
      return t == DType::kBF16 ? f32_from_bf16(bf16_from_f32(x)) : f32_from_f16(f16_from_f32(x));
    };
    std::vector<std::vector<uint16_t>> tree = h, stream = h;
    std::vector<BufView> leaves;
    for (auto& x : tree) leaves.push_back({x.data(), 256, t});
    canonical_tree_sum_inplace(leaves);
    CanonicalAccumulator acc(256, t);
    for (auto& x : stream) acc.push({x.data(), 256, t});
    std::vector<BufView> freed;
    const uint16_t* streamed = acc.finish(freed).float16();
    int differ_from_once = 0;
    for (int i = 0; i < 256; ++i) {
      const float want = r(r(r(w(0, i) + w(1, i)) + r(w(2, i) + w(3, i))) + r(w(4, i) + w(5, i)));
      const float got = t == DType::kBF16 ? f32_from_bf16(tree[0][i]) : f32_from_f16(tree[0][i]);
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << dtype_name(t) << " " << i;
      ASSERT_EQ(streamed[i], tree[0][i]) << dtype_name(t) << " " << i;
      const float once = r(((w(0, i) + w(1, i)) + (w(2, i) + w(3, i))) + (w(4, i) + w(5, i)));
      differ_from_once += std::bit_cast<uint32_t>(once) != std::bit_cast<uint32_t>(got);
    }
    EXPECT_GT(differ_from_once, 0) << dtype_name(t);
  }
}

TEST(CanonicalTree, NonPowerOfTwoBlocksDoNot) {
  // Why plan.h refuses M/dp = 3 in deterministic mode: blocks of 3 are not subtrees.
  auto l = random_leaves(6, 512, 99);
  const std::vector<float> want = tree_sum(l);
  std::vector<std::vector<float>> blocks = {tree_sum({l[0], l[1], l[2]}), tree_sum({l[3], l[4], l[5]})};
  const std::vector<float> got = tree_sum(blocks);
  int differ = 0;
  for (int i = 0; i < 512; ++i) differ += std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]);
  EXPECT_GT(differ, 0);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::kernels
