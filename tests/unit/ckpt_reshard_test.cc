// Resharding (ckpt/reshard.h) against closed forms: overlaps_of against a brute-force element map,
// and whole simulated checkpoints saved under one (dp, tp, pp, zero) and loaded under another, every
// parameter and moment compared bitwise with the value it must hold. Also: the replicated-copy
// rule, and gaps / double covers reported as corruption naming the tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "ckpt/load.h"
#include "ckpt/reshard.h"
#include "ckpt_test_util.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::ckpt {
namespace {
namespace SP_TEST_ID {
using test::simulate;

std::vector<Overlap> brute_overlaps(const Geometry& s, int64_t sa, int64_t sb, const Geometry& t, int64_t ta,
                                    int64_t tb) {
  std::map<int64_t, int64_t> target_of;  // logical -> target k
  for (int64_t k = ta; k < tb; ++k) target_of[t.logical(k)] = k;
  std::vector<Overlap> out;
  for (int64_t k = sa; k < sb; ++k) {
    const auto it = target_of.find(s.logical(k));
    if (it == target_of.end()) continue;
    if (!out.empty() && out.back().sk + out.back().n == k && out.back().tk + out.back().n == it->second)
      ++out.back().n;
    else
      out.push_back({k, it->second, 1});
  }
  return out;
}

TEST(CkptReshard, OverlapsMatchBruteForce) {
  std::mt19937_64 rng(7);
  const int64_t R = 12, C = 8;
  std::vector<std::pair<Shape, model::Slice>> geoms;
  for (int tp : {1, 2, 4}) {
    for (int r = 0; r < tp; ++r) {
      geoms.push_back({{R, C}, {0, R / tp * r, R / tp}});
      geoms.push_back({{R, C}, {1, C / tp * r, C / tp}});
    }
  }
  geoms.push_back({{R, C}, {-1, 0, R}});
  for (const auto& [sshape, sslice] : geoms)
    for (const auto& [tshape, tslice] : geoms) {
      const Geometry s = geometry_of(sshape, sslice), t = geometry_of(tshape, tslice);
      Shape sl = sshape, tl = tshape;
      if (sslice.dim >= 0) sl[static_cast<size_t>(sslice.dim)] = sslice.length;
      if (tslice.dim >= 0) tl[static_cast<size_t>(tslice.dim)] = tslice.length;
      for (int trial = 0; trial < 20; ++trial) {
        const int64_t sn = shape_numel(sl), tn = shape_numel(tl);
        int64_t sa = static_cast<int64_t>(rng() % static_cast<uint64_t>(sn)),
                sb = static_cast<int64_t>(rng() % static_cast<uint64_t>(sn + 1));
        int64_t ta = static_cast<int64_t>(rng() % static_cast<uint64_t>(tn)),
                tb = static_cast<int64_t>(rng() % static_cast<uint64_t>(tn + 1));
        if (sa > sb) std::swap(sa, sb);
        if (ta > tb) std::swap(ta, tb);
        const auto got = overlaps_of(s, sa, sb, t, ta, tb);
        const auto want = brute_overlaps(s, sa, sb, t, ta, tb);
        // Same element pairs (runs may be split differently at row ends): expand both.
        std::vector<std::pair<int64_t, int64_t>> g, w;
        for (const Overlap& o : got)
          for (int64_t i = 0; i < o.n; ++i) g.push_back({o.sk + i, o.tk + i});
        for (const Overlap& o : want)
          for (int64_t i = 0; i < o.n; ++i) w.push_back({o.sk + i, o.tk + i});
        ASSERT_EQ(g, w) << "src slice dim " << sslice.dim << " begin " << sslice.begin << " [" << sa << "," << sb
                        << ") tgt slice dim " << tslice.dim << " begin " << tslice.begin << " [" << ta << "," << tb
                        << ")";
      }
    }
  // 1-D tensors (norm weights) are one row.
  const Geometry n = geometry_of({16}, {-1, 0, 16});
  const auto o = overlaps_of(n, 2, 10, n, 5, 16);
  ASSERT_EQ(o.size(), 1u);
  EXPECT_EQ(o[0].sk, 5);
  EXPECT_EQ(o[0].tk, 5);
  EXPECT_EQ(o[0].n, 5);
}

// Loads a checkpoint saved under `from` into every rank of each `to` and checks every value.
void check_reshard(const Topology& from, const std::vector<Topology>& targets, bool tie = false) {
  const model::LlamaConfig c = test::small_model(tie);
  const sp::test::TempDir tmp("reshard");
  const std::string& dir = tmp.path();
  const Manifest m = test::write_sim_checkpoint(dir, 3, c, from);
  const CheckpointPaths paths(dir);
  ASSERT_TRUE(verify_checkpoint(paths, 3).ok()) << verify_checkpoint(paths, 3).message();
  auto source = CheckpointSource::open(paths.step_dir(3), m, c);
  ASSERT_TRUE(source.ok()) << source.status().message();
  for (const Topology& to : targets) {
    SCOPED_TRACE(from.describe() + " -> " + to.describe());
    std::vector<test::SimRank> ranks = simulate(c, to, false);
    int64_t checked = 0;
    for (test::SimRank& r : ranks) {
      const Status st = source->fill(r.spans, r.tp);
      ASSERT_TRUE(st.ok()) << st.message();
      for (const StateSpan& s : r.spans)
        for (const model::TensorSlot& slot : s.unit->tensors)
          for (int64_t x = std::max(s.begin, slot.offset); x < std::min(s.end, slot.offset + slot.numel); ++x)
            for (StateKind k : kStateKinds) {
              // The copy a replicated tensor comes from: the same tp rank if the saver had it, else 0.
              const int replica = slot.spec.tp_dim < 0 ? (r.tp < from.tp ? r.tp : 0) : -1;
              const float want = test::state_value(k, slot.spec.name, slot.logical_index(x - slot.offset), replica);
              const float got = s.data[static_cast<size_t>(k)][x - s.begin];
              ASSERT_EQ(std::memcmp(&want, &got, sizeof want), 0)
                  << slot.spec.name << " " << state_kind_name(k) << " local " << x - slot.offset << " on rank "
                  << r.rank;
              ++checked;
            }
    }
    // Every element of the model, times the replicas that hold it, was checked.
    EXPECT_GT(checked, 3 * c.param_count() - 1);
  }
}

TEST(CkptReshard, EveryTopologyPairIsBitwise) {
  const std::vector<Topology> topologies = {
      {1, 1, 1, 0, "tp-dp-pp"}, {2, 1, 1, 0, "tp-dp-pp"}, {2, 1, 1, 1, "tp-dp-pp"}, {3, 1, 1, 3, "tp-dp-pp"},
      {1, 2, 1, 0, "tp-dp-pp"}, {1, 4, 1, 0, "tp-dp-pp"}, {1, 1, 2, 0, "tp-dp-pp"}, {2, 2, 1, 3, "tp-dp-pp"},
      {2, 2, 2, 1, "tp-dp-pp"}, {1, 2, 4, 0, "tp-dp-pp"},
  };
  for (const Topology& a : topologies) check_reshard(a, topologies);
}

TEST(CkptReshard, TiedEmbeddings) {
  check_reshard({1, 2, 1, 0, "tp-dp-pp"}, {{2, 1, 1, 2, "tp-dp-pp"}, {1, 1, 1, 0, "tp-dp-pp"}}, true);
}

TEST(CkptReshard, ReadLogicalAssemblesWholeTensors) {
  const model::LlamaConfig c = test::small_model();
  const sp::test::TempDir tmp("reshard_logical");
  const std::string& dir = tmp.path();
  const Manifest m = test::write_sim_checkpoint(dir, 1, c, {2, 2, 2, 3, "tp-dp-pp"});
  auto source = CheckpointSource::open(CheckpointPaths(dir).step_dir(1), m, c);
  ASSERT_TRUE(source.ok()) << source.status().message();
  for (const model::WeightSpec& w : model::weight_table(c)) {
    std::vector<float> v(static_cast<size_t>(shape_numel(w.shape)));
    ASSERT_TRUE(source->read_logical(w.name, StateKind::kExpAvgSq, v.data()).ok());
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_EQ(v[i], test::state_value(StateKind::kExpAvgSq, w.name, static_cast<int64_t>(i), w.tp_dim < 0 ? 0 : -1))
          << w.name << " " << i;
  }
}

// A checkpoint whose fragments do not tile a tensor is corrupt, and the message names the tensor.
TEST(CkptReshard, GapsAndDoubleCoversAreCorruption) {
  const model::LlamaConfig c = test::small_model();
  const Topology t{2, 1, 1, 1, "tp-dp-pp"};
  for (const bool gap : {true, false}) {
    const sp::test::TempDir tmp("reshard_gap");
    const std::string& dir = tmp.path();
    const CheckpointPaths paths(dir);
    SP_CHECK(make_directories(paths.step_dir(1)).ok(), "mkdir");
    std::vector<test::SimRank> ranks = simulate(c, t, true);
    // gap: rank 1 stores nothing of its last span. double: rank 1 stores rank 0's first span again.
    std::vector<StateSpan> spans1 = ranks[1].spans;
    if (gap)
      spans1.pop_back();
    else
      spans1.push_back(ranks[0].spans[0]);
    Manifest m;
    m.step = 1;
    m.contract = {{"x", 1}};
    m.contract["hash"] = sha256_hex(m.contract.dump());
    m.contract_hash = m.contract["hash"];
    m.topology = t;
    m.loader_cursor = nlohmann::json::object();
    for (int r = 0; r < 2; ++r) {
      const ShardImage img = build_shard(r, test::coords_string(ranks[r]), 0, 1, r == 0 ? ranks[0].spans : spans1);
      ASSERT_TRUE(img.writer.write(CheckpointPaths::shard_in(paths.step_dir(1), r)).ok());
      m.shards.push_back(
          {r, test::coords_string(ranks[r]), shard_file_name(r), img.bytes, img.sha256, img.sha256_chunks});
    }
    m.seal();
    auto source = CheckpointSource::open(paths.step_dir(1), m, c);
    ASSERT_TRUE(source.ok()) << source.status().message();
    const Status cov = source->check_coverage();
    EXPECT_EQ(cov.code(), StatusCode::kCorrupt);
    EXPECT_NE(cov.message().find(gap ? "are in no shard" : "is stored twice"), std::string::npos) << cov.message();
    EXPECT_NE(cov.message().find("tensor"), std::string::npos);
    std::vector<test::SimRank> target = simulate(c, {1, 1, 1, 0, "tp-dp-pp"}, false);
    EXPECT_EQ(source->fill(target[0].spans, 0).code(), StatusCode::kCorrupt);
  }
}

// A checkpoint of another model is refused naming the tensor and both shapes.
TEST(CkptReshard, DifferentModelIsRefusedPerTensor) {
  const model::LlamaConfig c = test::small_model();
  const sp::test::TempDir tmp("reshard_model");
  const std::string& dir = tmp.path();
  const Manifest m = test::write_sim_checkpoint(dir, 1, c, {1, 1, 1, 0, "tp-dp-pp"});
  model::LlamaConfig other = c;
  other.ffn_dim = 32;
  auto source = CheckpointSource::open(CheckpointPaths(dir).step_dir(1), m, other);
  ASSERT_FALSE(source.ok());
  EXPECT_NE(source.status().message().find("mlp.gate_proj.weight"), std::string::npos) << source.status().message();
  EXPECT_NE(source.status().message().find("(24, 16)"), std::string::npos) << source.status().message();
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::ckpt
