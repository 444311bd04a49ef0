// Seeded mutation fuzzing of every checkpoint parser (RELIABILITY row 23): the manifest, LATEST and
// the shard metadata, byte-level (flips, overwrites, insertions, deletions, truncation, splices)
// and structure-aware (fragment fields set to hostile values: huge or negative shapes and ranges,
// path names, unknown kinds and tensors, duplicates). Every mutant must give a typed error or a
// valid result, never a crash, hang or out-of-bounds access (run under ASan/UBSan); mutants that
// still parse are loaded all the way (CheckpointSource::open, fill, check_coverage) so the
// reshard arithmetic sees hostile metadata too. Bounded: a fixed iteration count per target.
#include <gtest/gtest.h>

#include <random>

#include "ckpt/load.h"
#include "ckpt/reshard.h"
#include "ckpt_test_util.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::ckpt {
namespace {
namespace SP_TEST_ID {

constexpr int kIterations = 2500;

std::string mutate_bytes(std::string s, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits; ++e) {
    const size_t n = s.size();
    const size_t at = n == 0 ? 0 : static_cast<size_t>(rng() % n);
    switch (rng() % 7) {
      case 0:
        if (n) s[at] = static_cast<char>(s[at] ^ (1 << (rng() % 8)));
        break;
      case 1:
        if (n) s[at] = static_cast<char>(rng() % 256);
        break;
      case 2:
        s.insert(at, 1, static_cast<char>("{}[]\",:0-9e\\"[rng() % 12]));
        break;
      case 3:
        if (n) s.erase(at, 1 + rng() % 8);
        break;
      case 4:
        s.resize(at);
        break;
      case 5:
        if (n > 8) s.insert(at, s.substr(static_cast<size_t>(rng() % (n - 4)), 1 + rng() % 16));
        break;
      case 6:
        if (n) s[at] = "0123456789abcdef"[rng() % 16];
        break;
    }
  }
  return s;
}

nlohmann::json hostile_value(std::mt19937_64& rng) {
  static const std::vector<nlohmann::json> values = {-1,
                                                     0,
                                                     1,
                                                     2,
                                                     7,
                                                     int64_t{1} << 31,
                                                     int64_t{1} << 40,
                                                     int64_t{1} << 62,
                                                     INT64_MAX,
                                                     INT64_MIN,
                                                     UINT64_MAX,
                                                     1.5,
                                                     "../../etc/passwd",
                                                     "",
                                                     "param",
                                                     "exp_avg",
                                                     "model.norm.weight",
                                                     "lm_head.weight",
                                                     nullptr,
                                                     true,
                                                     nlohmann::json::array(),
                                                     nlohmann::json::array({-1, 0, 64}),
                                                     nlohmann::json::array({0, 1 << 30}),
                                                     nlohmann::json::array({1, 0, 8}),
                                                     nlohmann::json::array({64, 16}),
                                                     nlohmann::json::object(),
                                                     "0000000000000000"};
  return values[rng() % values.size()];
}

TEST(CkptFuzz, ManifestAndLatest) {
  std::mt19937_64 rng(20240601);
  Manifest m;
  m.step = 4;
  m.contract = {{"config", {{"model", test::small_model().to_json()}}}};
  m.contract["hash"] = sha256_hex(m.contract.dump());
  m.contract_hash = m.contract["hash"];
  m.topology = {2, 1, 1, 1, "tp-dp-pp"};
  m.optimizer_steps = 4;
  m.loader_cursor = {{"next_step", 4}};
  m.evidence["metrics.jsonl"] = {10, sha256_hex("x")};
  for (int r = 0; r < 2; ++r) m.shards.push_back({r, "c", shard_file_name(r), 100, sha256_hex("y"), {sha256_hex("z")}});
  m.seal();
  const std::string manifest = m.to_text();
  const std::string latest = Latest{4, m.digest}.to_text();
  int ok = 0;
  for (int i = 0; i < kIterations; ++i) {
    auto a = Manifest::parse(mutate_bytes(manifest, rng), "fuzz/manifest.json");
    if (a.ok()) {
      ++ok;
      (void)a->model_config();
    } else {
      EXPECT_NE(a.status().message().find("fuzz/manifest.json"), std::string::npos) << a.status().message();
    }
    // Structure-aware: a field set to a hostile value, digest recomputed so the field checks run.
    nlohmann::json j = m.to_json();
    const char* keys[] = {"step", "topology", "optimizer", "shards", "evidence", "contract_hash", "format_version"};
    const char* key = keys[rng() % 7];
    if (j[key].is_object() && !j[key].empty() && rng() % 2) {
      auto it = j[key].begin();
      std::advance(it, static_cast<long>(rng() % j[key].size()));
      *it = hostile_value(rng);
    } else if (j[key].is_array() && rng() % 2) {
      j[key][rng() % j[key].size()][std::string(rng() % 2 ? "file" : "bytes")] = hostile_value(rng);
    } else {
      j[key] = hostile_value(rng);
    }
    j.erase("digest");
    j["digest"] = sha256_hex(j.dump());
    auto b = Manifest::parse(j.dump(), "fuzz/manifest.json");
    if (b.ok()) ++ok;
    auto l = Latest::parse(mutate_bytes(latest, rng), "fuzz/LATEST");
    if (l.ok()) ++ok;
  }
  EXPECT_LT(ok, kIterations);  // almost every mutant is refused
}

TEST(CkptFuzz, ShardMetadataAndLoad) {
  std::mt19937_64 rng(99);
  const model::LlamaConfig c = test::small_model();
  const WeightIndex weights = weight_index(c);
  const Topology t{1, 2, 1, 0, "tp-dp-pp"};
  std::vector<test::SimRank> ranks = test::simulate(c, t, true);
  // Rank 1 (tp 1) keeps only part of its spans so fragments start and end mid-tensor.
  ranks[1].spans.resize(2);
  ranks[1].spans[1].end = ranks[1].spans[1].begin + ranks[1].spans[1].unit->numel / 3;
  const ShardImage img = build_shard(1, "dp0.tp1.pp0", 1, 7, ranks[1].spans);
  const std::string seed_bytes = img.writer.to_bytes();
  auto seed_reader = SafetensorsReader::from_bytes(seed_bytes, "seed");
  ASSERT_TRUE(seed_reader.ok());
  const nlohmann::json fragments = nlohmann::json::parse(seed_reader->metadata().at(std::string(kMetaFragments)));
  ASSERT_TRUE(fragments.is_array() && !fragments.empty());
  const sp::test::TempDir tmp("ckpt_fuzz");
  const std::string& dir = tmp.path();
  const CheckpointPaths paths(dir);
  ASSERT_TRUE(make_directories(paths.step_dir(7)).ok());
  std::vector<test::SimRank> target = test::simulate(c, {1, 1, 1, 0, "tp-dp-pp"}, false);
  int parsed = 0, loaded = 0;
  for (int i = 0; i < kIterations; ++i) {
    std::string bytes;
    if (i % 2 == 0) {
      bytes = mutate_bytes(seed_bytes, rng);
    } else {
      // Same tensors, hostile fragment list: rebuilt so the safetensors layer accepts the file.
      nlohmann::json list = fragments;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        nlohmann::json& f = list[rng() % list.size()];
        const char* keys[] = {"name", "tensor", "kind", "shape", "slice", "tp_rank", "range", "xxh3"};
        const char* key = keys[rng() % 8];
        if (f[key].is_array() && !f[key].empty() && rng() % 2)
          f[key][rng() % f[key].size()] = hostile_value(rng);
        else
          f[key] = hostile_value(rng);
        if (rng() % 8 == 0) list.push_back(list[rng() % list.size()]);  // duplicate
      }
      SafetensorsWriter w;
      auto reader = SafetensorsReader::from_bytes(seed_bytes, "seed");
      ASSERT_TRUE(reader.ok());
      std::vector<std::string> data;
      for (const SafetensorsEntry& e : reader->tensors()) data.emplace_back(e.nbytes(), '\0');
      for (size_t k = 0; k < reader->tensors().size(); ++k) {
        const SafetensorsEntry& e = reader->tensors()[k];
        ASSERT_TRUE(reader->read(e, data[k].data()).ok());
        w.add(e.name, e.dtype, e.shape, data[k].data());
      }
      for (const auto& [k, v] : reader->metadata()) w.set_metadata(k, v);
      w.set_metadata(std::string(kMetaFragments), list.dump());
      bytes = w.to_bytes();
    }
    auto reader = SafetensorsReader::from_bytes(bytes, "fuzz/rank-00001.safetensors");
    if (!reader.ok()) continue;
    auto content = read_shard_metadata(*reader, weights, 2, 1, 7);
    if (!content.ok()) {
      EXPECT_NE(content.status().message().find("fuzz/rank-00001.safetensors"), std::string::npos)
          << content.status().message();
      continue;
    }
    ++parsed;
    // Accepted metadata: load it all the way, as rank 1 of a 2-rank checkpoint whose rank 0 is empty.
    const ShardImage empty = build_shard(0, "dp0.tp0.pp0", 0, 7, {});
    ASSERT_TRUE(empty.writer.write(CheckpointPaths::shard_in(paths.step_dir(7), 0)).ok());
    ASSERT_TRUE(write_file(CheckpointPaths::shard_in(paths.step_dir(7), 1), bytes).ok());
    Manifest m;
    m.step = 7;
    m.contract = {{"hash", sha256_hex("c")}};
    m.contract_hash = m.contract["hash"];
    m.topology = t;
    m.shards = {{0, "a", shard_file_name(0), empty.bytes, empty.sha256, empty.sha256_chunks},
                {1, "b", shard_file_name(1), bytes.size(), sha256_hex(bytes), {}}};  // open() reads no digests
    auto source = CheckpointSource::open(paths.step_dir(7), m, c);
    if (!source.ok()) continue;
    ++loaded;
    (void)source->check_coverage();  // rank 0 stored nothing: incomplete, reported, never a crash
    (void)source->fill(target[0].spans, 0);
    std::vector<float> v(64 * 16);
    (void)source->read_logical("model.embed_tokens.weight", StateKind::kParam, v.data());
  }
  EXPECT_GT(parsed, 0);  // the corpus reaches the loader
  EXPECT_GT(loaded, 0);
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::ckpt
