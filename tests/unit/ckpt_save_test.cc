// The commit protocol (ckpt/save.h) on one rank, and the damage the loader must refuse
// (RELIABILITY.md rows 3–9): a flipped bit in a shard, the manifest or LATEST; a truncated,
// zero-byte or missing shard; leftover partial directories; a second save of the same step; a full
// disk; retention. Every refusal must name the file (and the tensor where it can be found), and
// nothing committed may change.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ckpt/load.h"
#include "ckpt/reshard.h"
#include "ckpt_test_util.h"
#include "core/file_io.h"
#include "temp_dir.h"
#include "unity_id.h"

namespace sp::ckpt {
namespace {
namespace SP_TEST_ID {
namespace fs = std::filesystem;

class CkptSave : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = test::small_model();
    ranks_ = test::simulate(config_, {1, 1, 1, 0, "tp-dp-pp"}, true);
  }

  SaveRequest request(int64_t step, int64_t keep_last = 2) {
    SaveRequest r;
    r.run_dir = dir_;
    r.step = step;
    r.coords = "dp0.tp0.pp0";
    r.spans = ranks_[0].spans;
    r.manifest.contract = {{"config", {{"model", config_.to_json()}}}};
    r.manifest.contract["hash"] = sha256_hex(r.manifest.contract.dump());
    r.manifest.contract_hash = r.manifest.contract["hash"];
    r.manifest.optimizer_steps = step;
    r.manifest.loader_cursor = {{"next_step", step}};
    r.rank_coords = {"dp0.tp0.pp0"};
    r.keep_last = keep_last;
    return r;
  }
  Result<SaveOutcome> save(const SaveRequest& r) { return save_checkpoint(world_, r); }
  std::string shard(int64_t step) const { return CheckpointPaths::shard_in(paths().step_dir(step), 0); }
  CheckpointPaths paths() const { return CheckpointPaths(dir_); }
  std::string read(const std::string& p) const { return read_file(p).value(); }
  // Everything under checkpoints/ (names and bytes): "nothing lost or changed" is equality of this.
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(paths().root()))
      if (e.is_regular_file()) out[fs::relative(e.path(), paths().root()).string()] = read(e.path().string());
    return out;
  }
  void flip_bit(const std::string& path, uint64_t offset, int bit) {
    std::string b = read(path);
    b[offset] = static_cast<char>(b[offset] ^ (1 << bit));
    ASSERT_TRUE(write_file(path, b).ok());
  }

  const sp::test::TempDir tmp_{"ckpt_save"};
  const std::string dir_ = tmp_.path();
  model::LlamaConfig config_;
  std::vector<test::SimRank> ranks_;
  test::LocalCommunicator world_;
};

TEST_F(CkptSave, CommitWritesVerifiableCheckpointAndLatest) {
  auto out = save(request(2));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_FALSE(out->kept_existing);
  EXPECT_EQ(out->dir, paths().step_dir(2));
  EXPECT_GT(out->bytes, 0u);
  auto latest = read_latest(paths());
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->step, 2);
  EXPECT_TRUE(verify_checkpoint(paths(), 2).ok()) << verify_checkpoint(paths(), 2).message();
  EXPECT_FALSE(path_exists(paths().partial_dir(2)));
  // The stored values are the state's, bitwise.
  auto m = read_manifest(paths(), 2);
  auto source = CheckpointSource::open(paths().step_dir(2), *m, config_);
  ASSERT_TRUE(source.ok());
  std::vector<test::SimRank> back = test::simulate(config_, {1, 1, 1, 0, "tp-dp-pp"}, false);
  ASSERT_TRUE(source->fill(back[0].spans, 0).ok());
  for (size_t i = 0; i < back[0].buffers.size(); ++i)
    EXPECT_EQ(std::memcmp(back[0].buffers[i].data(), ranks_[0].buffers[i].data(), 4 * back[0].buffers[i].size()), 0);
}

TEST_F(CkptSave, RetentionKeepsNewestAndDeletesOnlyAfterCommit) {
  for (int64_t s = 1; s <= 4; ++s) ASSERT_TRUE(save(request(s, 2)).ok());
  auto listing = list_checkpoints(paths());
  EXPECT_EQ(listing->steps, (std::vector<int64_t>{3, 4}));
  auto out = save(request(5, 1));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->deleted, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(list_checkpoints(paths())->steps, std::vector<int64_t>{5});
  // keep_last = 1 with a failing save: the one complete checkpoint stays (rows 3 and 9).
  SaveRequest r = request(6, 1);
  r.fault = SaveFault{false, SavePhase::kShardWrite, 6, 0};
  EXPECT_FALSE(save(r).ok());
  EXPECT_EQ(list_checkpoints(paths())->steps, std::vector<int64_t>{5});
  EXPECT_EQ(read_latest(paths())->step, 5);
  EXPECT_TRUE(verify_checkpoint(paths(), 5).ok());
}

TEST_F(CkptSave, FullDiskLeavesNothingAndNamesTheFile) {
  ASSERT_TRUE(save(request(2)).ok());
  const auto before = snapshot();
  SaveRequest r = request(4);
  r.fault = SaveFault{false, SavePhase::kShardWrite, -1, -1};
  auto out = save(r);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kIo);
  EXPECT_NE(out.status().message().find("rank-00000.safetensors"), std::string::npos) << out.status().message();
  EXPECT_NE(out.status().message().find("No space left on device"), std::string::npos);
  EXPECT_NE(out.status().message().find("LATEST is unchanged"), std::string::npos);
  EXPECT_EQ(snapshot(), before);  // no partial directory, no zero-byte file, LATEST unchanged
}

TEST_F(CkptSave, LeftoverPartialsAreIgnoredThenRemoved) {
  ASSERT_TRUE(save(request(2)).ok());
  ASSERT_TRUE(make_directories(paths().partial_dir(4)).ok());
  ASSERT_TRUE(write_file(CheckpointPaths::shard_in(paths().partial_dir(4), 0), "").ok());  // a zero-byte leftover
  auto c = find_candidates(paths(), false);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->steps, std::vector<int64_t>{2});  // load ignores it
  ASSERT_TRUE(save(request(3)).ok());
  EXPECT_FALSE(path_exists(paths().partial_dir(4)));  // the next save removed it
}

TEST_F(CkptSave, SecondSaveOfAStep) {
  ASSERT_TRUE(save(request(2)).ok());
  // Identical state: kept, not rewritten.
  const auto before = snapshot();
  auto again = save(request(2));
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->kept_existing);
  EXPECT_EQ(snapshot(), before);
  // Different state for a committed step: refused, nothing changed.
  ranks_[0].buffers[0][0] += 1.0f;
  auto diff = save(request(2));
  ASSERT_FALSE(diff.ok());
  EXPECT_EQ(diff.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(diff.status().message().find("never overwritten"), std::string::npos) << diff.status().message();
  EXPECT_EQ(snapshot(), before);
  // A step directory newer than LATEST never finished its commit: a save of that step replaces it.
  ASSERT_TRUE(save(request(4)).ok());
  ASSERT_TRUE(write_file_atomic(paths().latest(), Latest{2, read_manifest(paths(), 2)->digest}.to_text()).ok());
  ranks_[0].buffers[0][0] += 1.0f;
  auto replaced = save(request(4));
  ASSERT_TRUE(replaced.ok()) << replaced.status().message();
  EXPECT_FALSE(replaced->kept_existing);
  EXPECT_EQ(read_latest(paths())->step, 4);
  EXPECT_TRUE(verify_checkpoint(paths(), 4).ok());
}

TEST_F(CkptSave, DamageIsRefusedNamingFileAndTensor) {
  ASSERT_TRUE(save(request(2)).ok());
  ASSERT_TRUE(save(request(4)).ok());
  const auto pristine = snapshot();
  auto restore = [&] {
    fs::remove_all(paths().root());
    for (const auto& [name, bytes] : pristine) {
      SP_CHECK(make_directories((fs::path(paths().root()) / name).parent_path().string()).ok(), "mkdir");
      SP_CHECK(write_file((fs::path(paths().root()) / name).string(), bytes).ok(), "write");
    }
  };
  const std::string shard4 = shard(4);
  auto m = read_manifest(paths(), 4);
  auto reader = SafetensorsReader::open(shard4);
  ASSERT_TRUE(reader.ok());
  const SafetensorsEntry& victim = reader->tensors()[reader->tensors().size() / 2];

  struct Case {
    const char* what;
    std::function<void()> damage;
    std::vector<std::string> expect;  // substrings of the refusal
  };
  const std::vector<Case> cases = {
      {"bit flip in a tensor",
       [&] { flip_bit(shard4, reader->data_offset() + victim.begin + 5, 3); },
       {shard4, "SHA-256", victim.name}},
      {"bit flip in the shard header", [&] { flip_bit(shard4, 20, 0); }, {shard4}},
      {"truncated by one byte",
       [&] { ASSERT_EQ(::truncate(shard4.c_str(), static_cast<off_t>(m->shards[0].bytes - 1)), 0); },
       {shard4, "truncated", std::to_string(m->shards[0].bytes)}},
      {"zero bytes", [&] { ASSERT_EQ(::truncate(shard4.c_str(), 0), 0); }, {shard4, "is 0 bytes"}},
      {"missing", [&] { fs::remove(shard4); }, {shard4, "missing"}},
      {"bit flip in the manifest",
       [&] { flip_bit(CheckpointPaths::manifest_in(paths().step_dir(4)), 100, 1); },
       {"manifest.json"}},
      {"bit flip in LATEST's digest",
       [&] { flip_bit(paths().latest(), read(paths().latest()).size() - 5, 0); },
       {"LATEST"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    restore();
    c.damage();
    // verify_checkpoint is what `ckpt verify` and (split over ranks) a resume run.
    Status st = verify_checkpoint(paths(), 4);
    if (std::string(c.what).find("LATEST") != std::string::npos) {
      auto latest = read_latest(paths());
      if (latest.ok())
        st = verify_checkpoint(paths(), latest->step);
      else
        st = latest.status();
    }
    ASSERT_FALSE(st.ok());
    for (const std::string& e : c.expect) EXPECT_NE(st.message().find(e), std::string::npos) << st.message();
    // Nothing else changed: the previous checkpoint still verifies.
    EXPECT_TRUE(verify_checkpoint(paths(), 2).ok());
    // With fallback the candidates continue with step 2.
    auto cands = find_candidates(paths(), true);
    ASSERT_TRUE(cands.ok());
    EXPECT_NE(std::find(cands->steps.begin(), cands->steps.end(), 2), cands->steps.end());
  }
}

TEST(CkptFaults, Parse) {
  auto f = parse_save_fault("ckpt-kill-before-rename@4:2");
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_TRUE((*f)->kill);
  EXPECT_EQ((*f)->phase, SavePhase::kBeforeRename);
  EXPECT_EQ((*f)->step, 4);
  EXPECT_EQ((*f)->rank, 2);
  f = parse_save_fault("ckpt-enospc:1");
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_FALSE((*f)->kill);
  EXPECT_EQ((*f)->step, -1);
  EXPECT_EQ((*f)->rank, 1);
  f = parse_save_fault("ckpt-kill-shard-write");
  ASSERT_TRUE(f.ok() && f->has_value());
  EXPECT_TRUE((*f)->matches(SavePhase::kShardWrite, 9, 3));
  EXPECT_FALSE((*f)->matches(SavePhase::kAfterLatest, 9, 3));
  f = parse_save_fault("nan-injection@3");
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->has_value());  // someone else's fault
  for (const char* bad : {"ckpt-kill-sometime", "ckpt-kill-shard-write@x", "ckpt-enospc:", "ckpt-enospc:1@2"})
    EXPECT_FALSE(parse_save_fault(bad).ok()) << bad;
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::ckpt
