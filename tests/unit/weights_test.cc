// The weight table (model/weights.h): HF names, sizes that add up to param_count, TP shards that tile
// each logical tensor exactly once, and shard-invariant initialization.
#include "model/weights.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "unity_id.h"

namespace sp::model {
namespace {
namespace SP_TEST_ID {

LlamaConfig cfg(bool tie) {
  LlamaConfig c;
  c.vocab_size = 40;
  c.dim = 24;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 20;
  c.max_seq = 8;
  c.tie_embeddings = tie;
  return c;
}

TEST(Weights, CanonicalNamesAndCount) {
  for (bool tie : {false, true}) {
    const LlamaConfig c = cfg(tie);
    int64_t total = 0;
    std::set<std::string> names;
    for (int id = 0; id < unit_count(c); ++id)
      for (const TensorSlot& t : unit_layout(c, id, 0, 1).tensors) {
        total += t.numel;
        names.insert(t.spec.name);
      }
    EXPECT_EQ(total, c.param_count());
    EXPECT_TRUE(names.count("model.layers.1.self_attn.k_proj.weight"));
    EXPECT_TRUE(names.count("model.embed_tokens.weight"));
    EXPECT_EQ(names.count("lm_head.weight"), tie ? 0u : 1u);
  }
}

TEST(Weights, TpShardsTileEveryTensorOnce) {
  const LlamaConfig c = cfg(false);
  for (int tp : {1, 2}) {
    for (int id = 0; id < unit_count(c); ++id) {
      std::map<std::string, std::vector<int>> hits;
      for (int r = 0; r < tp; ++r) {
        const UnitLayout u = unit_layout(c, id, r, tp);
        for (const TensorSlot& t : u.tensors) {
          if (t.spec.tp_dim < 0 && r > 0) continue;  // replicated: counted once
          auto& h = hits[t.spec.name];
          h.resize(static_cast<size_t>(shape_numel(t.spec.shape)));
          for (int64_t k = 0; k < t.numel; ++k) ++h[static_cast<size_t>(t.logical_index(k))];
        }
      }
      for (const auto& [name, h] : hits)
        for (size_t j = 0; j < h.size(); ++j) ASSERT_EQ(h[j], 1) << name << " element " << j << " tp " << tp;
    }
  }
}

TEST(Weights, InitializationIsShardInvariant) {
  const LlamaConfig c = cfg(false);
  for (int id = 0; id < unit_count(c); ++id) {
    const UnitLayout full = unit_layout(c, id, 0, 1);
    std::vector<float> ref(static_cast<size_t>(full.numel));
    init_unit(ref.data(), full, 42, 0.02f);
    for (int r = 0; r < 2; ++r) {
      const UnitLayout u = unit_layout(c, id, r, 2);
      std::vector<float> shard(static_cast<size_t>(u.numel));
      init_unit(shard.data(), u, 42, 0.02f);
      for (const TensorSlot& t : u.tensors) {
        const TensorSlot& tf = full.tensor(t.spec.name.substr(t.spec.name.rfind('.', t.spec.name.size() - 8) + 1));
        for (int64_t k = 0; k < t.numel; ++k)
          ASSERT_EQ(shard[static_cast<size_t>(t.offset + k)], ref[static_cast<size_t>(tf.offset + t.logical_index(k))])
              << t.spec.name;
      }
    }
  }
}

// A ZeRO-3 rank draws only its shard: every range of every TP shard's flat buffer (including ranges
// that start or end inside a tensor, or cover a norm's ones) equals that range of the whole draw.
TEST(Weights, RangeInitializationEqualsTheWholeDraw) {
  const LlamaConfig c = cfg(false);
  for (int id = 0; id < unit_count(c); ++id)
    for (int r = 0; r < 2; ++r) {
      const UnitLayout u = unit_layout(c, id, r, 2);
      std::vector<float> whole(static_cast<size_t>(u.numel));
      init_unit(whole.data(), u, 42, 0.02f);
      for (int parts : {1, 2, 3, 7}) {
        for (int p = 0; p < parts; ++p) {
          const int64_t b = u.numel * p / parts, e = u.numel * (p + 1) / parts;
          std::vector<float> piece(static_cast<size_t>(e - b), -1.0f);
          init_unit_range(piece.data(), u, 42, 0.02f, b, e);
          for (int64_t k = b; k < e; ++k)
            ASSERT_EQ(piece[static_cast<size_t>(k - b)], whole[static_cast<size_t>(k)])
                << "unit " << id << " tp rank " << r << " element " << k << " of range [" << b << ", " << e << ")";
        }
      }
    }
}

TEST(Weights, DifferentSeedsDiffer) {
  const LlamaConfig c = cfg(false);
  const UnitLayout u = unit_layout(c, 1, 0, 1);
  std::vector<float> a(static_cast<size_t>(u.numel)), b(static_cast<size_t>(u.numel));
  init_unit(a.data(), u, 1, 0.02f);
  init_unit(b.data(), u, 2, 0.02f);
  EXPECT_NE(a, b);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::model
