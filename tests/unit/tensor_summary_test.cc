// Shard-invariant tensor digests (evidence/tensor_summary.h): the summary of a logical tensor is
// the same whichever way it is split (ZeRO flat ranges, TP row and column shards), a single flipped
// bit changes it, and the integer transport sums exactly over "ranks".
#include "evidence/tensor_summary.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "evidence/checksums.h"
#include "model/weights.h"
#include "tensor/float16.h"
#include "unity_id.h"

namespace sp::evidence {
namespace {
namespace SP_TEST_ID {

model::LlamaConfig cfg() {
  model::LlamaConfig c;
  c.vocab_size = 32;
  c.dim = 16;
  c.n_layers = 1;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 24;
  c.max_seq = 8;
  return c;
}

std::vector<float> logical_values(int64_t n) {
  std::mt19937 rng(4);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// The summary of a logical tensor computed from tp shards of one unit layout.
TensorSummary from_tp_shards(const model::LlamaConfig& c, int unit, const std::string& suffix, int tp,
                             const std::vector<float>& logical) {
  TensorSummary total;
  for (int r = 0; r < tp; ++r) {
    const model::UnitLayout u = model::unit_layout(c, unit, r, tp);
    const model::TensorSlot& t = u.tensor(suffix);
    std::vector<float> shard(static_cast<size_t>(t.numel));
    for (int64_t k = 0; k < t.numel; ++k)
      shard[static_cast<size_t>(k)] = logical[static_cast<size_t>(t.logical_index(k))];
    // Cut the shard itself in two flat pieces, as ZeRO would.
    TensorSummary s;
    const int64_t cut = t.numel / 3;
    s.add_shard(shard.data(), t, 0, cut);
    s.add_shard(shard.data() + cut, t, cut, t.numel);
    total.merge(s);
  }
  return total;
}

TEST(TensorSummary, RowAndColumnShardsGiveTheSingleDeviceDigest) {
  const auto c = cfg();
  for (const char* suffix : {"q_proj.weight", "o_proj.weight", "down_proj.weight", "input_layernorm.weight"}) {
    const model::UnitLayout u1 = model::unit_layout(c, 1, 0, 1);
    const auto& t = u1.tensor(suffix);
    const std::vector<float> logical = logical_values(t.numel);
    TensorSummary ref;
    ref.add_contiguous(logical.data(), t.numel, 0);
    for (int tp : {1, 2}) {
      if (t.spec.tp_dim < 0 && tp > 1) continue;
      const TensorSummary got = from_tp_shards(c, 1, suffix, tp, logical);
      EXPECT_EQ(got.digest(), ref.digest()) << suffix << " tp=" << tp;
      EXPECT_EQ(std::bit_cast<uint64_t>(got.stats.sum_squares()), std::bit_cast<uint64_t>(ref.stats.sum_squares()));
      EXPECT_EQ(got.stats.count(), static_cast<uint64_t>(t.numel));
    }
  }
}

TEST(TensorSummary, OneFlippedBitChangesBothLanes) {
  std::vector<float> v = logical_values(4096);
  TensorSummary a;
  a.add_contiguous(v.data(), 4096, 0);
  for (int bit : {0, 13, 31}) {
    std::vector<float> w = v;
    w[1234] = std::bit_cast<float>(std::bit_cast<uint32_t>(w[1234]) ^ (1u << bit));
    TensorSummary b;
    b.add_contiguous(w.data(), 4096, 0);
    EXPECT_NE(a.lane0, b.lane0);
    EXPECT_NE(a.lane1, b.lane1);
  }
}

TEST(TensorSummary, SwappedElementsChangeTheDigest) {
  std::vector<float> v = logical_values(64);
  TensorSummary a, b;
  a.add_contiguous(v.data(), 64, 0);
  std::swap(v[3], v[40]);
  b.add_contiguous(v.data(), 64, 0);
  EXPECT_NE(a.digest(), b.digest());
  EXPECT_EQ(std::bit_cast<uint64_t>(a.stats.sum()), std::bit_cast<uint64_t>(b.stats.sum()));  // stats cannot tell
}

TEST(TensorSummary, TransportSumsExactlyOverRanks) {
  std::vector<float> v = logical_values(10000);
  TensorSummary whole;
  whole.add_contiguous(v.data(), 10000, 0);
  // Four "ranks" hold flat pieces; summing their words as an MPI integer SUM would.
  std::vector<uint64_t> acc(TensorSummary::kSumWords, 0);
  uint64_t mx = 0;
  const int64_t cuts[] = {0, 100, 5000, 5001, 10000};
  for (int r = 0; r < 4; ++r) {
    TensorSummary s;
    s.add_contiguous(v.data() + cuts[r], cuts[r + 1] - cuts[r], cuts[r]);
    std::vector<uint64_t> w(TensorSummary::kSumWords);
    s.to_sum_words(w);
    for (size_t i = 0; i < w.size(); ++i) acc[i] += w[i];
    mx = std::max(mx, s.max_word());
  }
  const TensorSummary got = TensorSummary::from_words(acc, mx);
  EXPECT_EQ(got.digest(), whole.digest());
  EXPECT_EQ(std::bit_cast<uint64_t>(got.stats.sum_squares()), std::bit_cast<uint64_t>(whole.stats.sum_squares()));
  EXPECT_EQ(std::bit_cast<uint64_t>(got.stats.sum()), std::bit_cast<uint64_t>(whole.stats.sum()));
  EXPECT_EQ(got.stats.absmax(), whole.stats.absmax());
  EXPECT_EQ(got.stats.count(), 10000u);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::evidence

namespace sp::evidence {
namespace {
namespace SP_TEST_ID {

// The vectorized digest path is the scalar definition bit for bit, for every length mod 8 (tails),
// odd starting indices and non-finite patterns; on a CPU without AVX-512DQ both calls take the
// scalar path and the test still checks mix_lanes against summary_mix.
TEST(TensorSummary, SimdDigestEqualsScalarDefinition) {
  std::vector<float> v = logical_values(1000);
  v[3] = std::bit_cast<float>(0x7fc00001u);  // NaN payload
  v[11] = -0.0f;
  v[17] = std::bit_cast<float>(0x00000001u);  // smallest subnormal
  for (int64_t n : {0, 1, 7, 8, 9, 63, 64, 65, 1000})
    for (int64_t first : {int64_t{0}, int64_t{5}, int64_t{1} << 40}) {
      uint64_t a = 0, b = 0;
      for (int64_t k = 0; k < n; ++k) {
        a += summary_mix(static_cast<uint64_t>(first + k), std::bit_cast<uint32_t>(v[static_cast<size_t>(k)]), 0);
        b += summary_mix(static_cast<uint64_t>(first + k), std::bit_cast<uint32_t>(v[static_cast<size_t>(k)]), 1);
      }
      uint64_t sa = 7, sb = 9, ra = 7, rb = 9;  // accumulates onto what is there
      mix_lanes(v.data(), n, first, sa, sb, true);
      mix_lanes(v.data(), n, first, ra, rb, false);
      EXPECT_EQ(sa, a + 7) << "n=" << n << " first=" << first << " simd=" << mix_lanes_simd_available();
      EXPECT_EQ(sb, b + 9) << "n=" << n << " first=" << first;
      EXPECT_EQ(ra, a + 7) << "n=" << n << " first=" << first;
      EXPECT_EQ(rb, b + 9) << "n=" << n << " first=" << first;
    }
}

// add_contiguous runs the statistics and the lanes block by block in one pass; the result must be the two
// whole-tensor sweeps' (exact sums and sums mod 2^64 are order-free): several blocks, a ragged tail, a
// logical offset, and the digest-free path.
TEST(TensorSummary, OnePassEqualsTwoSweeps) {
  const int64_t n = 3 * 32768 + 12345, first = 777;
  const std::vector<float> v = logical_values(n);
  TensorSummary fused, swept, stats_only;
  fused.add_contiguous(v.data(), n, first);
  swept.stats.add(v.data(), static_cast<size_t>(n));
  mix_lanes(v.data(), n, first, swept.lane0, swept.lane1);
  stats_only.add_contiguous(v.data(), n, first, false);
  EXPECT_EQ(fused.lane0, swept.lane0);
  EXPECT_EQ(fused.lane1, swept.lane1);
  EXPECT_EQ(fused.stats.to_words(), swept.stats.to_words());
  EXPECT_EQ(stats_only.stats.to_words(), swept.stats.to_words());
  EXPECT_EQ(stats_only.lane0, 0u);
}

// 16-bit gradient pieces (GradStore::evidence_pieces with train.grad_dtype bf16/fp16) are summarized in
// place, widened block by block: every logical tensor's summary must be that of the same pieces widened to
// fp32 first (the path of fp32 gradients), digest and statistics, row and column (tp 2) shards, pieces cut
// inside a tensor and blocks ending inside a row (q/k/v: 51,200 elements; o_proj's tp shard: rows of 80).
TEST(TensorSummary, SixteenBitPiecesEqualTheirWidening) {
  model::LlamaConfig c = cfg();
  c.dim = 160;  // head_dim 40
  c.ffn_dim = 200;
  for (DType t : {DType::kBF16, DType::kF16})
    for (int tp : {1, 2}) {
      const model::UnitLayout u = model::unit_layout(c, 1, tp - 1, tp);
      std::vector<float> v = logical_values(u.numel);
      for (int64_t i = 0; i < u.numel; i += 997) v[static_cast<size_t>(i)] = i % 2 ? 0.0f : -1e-7f;  // fp16 subnormals
      std::vector<uint16_t> h(v.size());
      float16_from_f32(h.data(), v.data(), u.numel, t);
      std::vector<float> wide(v.size());
      f32_from_float16(wide.data(), h.data(), u.numel, t);
      const int64_t cut = u.numel / 3 + 7;
      const std::vector<model::UnitPiece> p16 = {{&u, 0, cut, h.data(), t}, {&u, cut, u.numel, h.data() + cut, t}},
                                          p32 = {{&u, 0, cut, wide.data()}, {&u, cut, u.numel, wide.data() + cut}};
      const LogicalTensors tensors(c);
      for (bool digest : {true, false}) {
        const std::vector<TensorSummary> a = summarize_pieces(tensors, p16, true, digest),
                                         b = summarize_pieces(tensors, p32, true, digest);
        ASSERT_EQ(a.size(), b.size());
        for (size_t i = 0; i < a.size(); ++i) {
          const std::string what =
              fmt::format("{} tp {} digest {} {}", dtype_name(t), tp, digest, tensors.spec(i).name);
          EXPECT_EQ(a[i].lane0, b[i].lane0) << what;
          EXPECT_EQ(a[i].lane1, b[i].lane1) << what;
          EXPECT_EQ(a[i].stats.to_words(), b[i].stats.to_words()) << what;
          EXPECT_EQ(a[i].stats.absmax(), b[i].stats.absmax()) << what;
        }
        EXPECT_GT(merge_all(a).stats.count(), 0u);
      }
    }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::evidence

namespace sp::evidence {
namespace {
namespace SP_TEST_ID {

// checksums.jsonl lines are formatted directly (ChecksumWriter's hot path); they must stay the bytes
// of the json object the record is defined as, for ordinary, integral, tiny, huge, zero-laden and
// non-finite statistics and for names that need escaping.
TEST(TensorSummary, RecordLineEqualsTheJsonObjectDump) {
  const std::vector<std::vector<float>> cases = {
      {0.5f, -0.25f, 3.0f},
      {1.0f, 2.0f, 3.0f},
      {0.0f, -0.0f},
      {1e-30f, std::bit_cast<float>(0x00000001u), -2e-38f},
      {3e38f, 3e38f, -1e20f},
      {1.0f, std::numeric_limits<float>::infinity()},
      {std::numeric_limits<float>::quiet_NaN(), 2.0f},
      {},
  };
  for (size_t c = 0; c < cases.size(); ++c)
    for (const std::string name : {"model.layers.0.mlp.up_proj.weight", "odd \"name\"\\\n"}) {
      TensorSummary s;
      s.add_contiguous(cases[c].data(), static_cast<int64_t>(cases[c].size()), 7);
      nlohmann::json j = {
          {"step", -3 + static_cast<int64_t>(c)}, {"phase", "param"}, {"tensor", name}, {"numel", 1234567}};
      j.update(s.to_json());
      EXPECT_EQ(tensor_record(-3 + static_cast<int64_t>(c), "param", name, 1234567, s), j.dump() + "\n") << c;
    }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::evidence
