// The commit protocol on real MPI ranks (ckpt/save.h with comm::agree): every rank writes its
// shard of a simulated ZeRO-1 job; the checkpoint verifies and every rank loads the whole model back
// bitwise; a full disk on the last rank fails the save on EVERY rank with a message naming that rank
// and its file, removes the partial directory and leaves LATEST and the committed checkpoint alone.
// Assertions never skip a collective (mpi_test_main.cc).
#include <gtest/gtest.h>

#include <filesystem>

#include "ckpt/load.h"
#include "ckpt/reshard.h"
#include "ckpt_test_util.h"
#include "comm/agree.h"
#include "comm/mpi_communicator.h"
#include "mpi_test_util.h"

namespace sp::ckpt {
namespace {

class CkptCommit : public ::testing::Test {
 protected:
  void SetUp() override {
    world_ = comm::make_world_communicator();
    dir_ = comm::test::shared_temp_dir(*world_, "ckpt_commit");
    topo_ = {world_->size(), 1, 1, 1, "tp-dp-pp"};
    ranks_ = test::simulate(config_, topo_, true);
  }
  void TearDown() override {
    world_->barrier();
    if (world_->rank() == 0) std::filesystem::remove_all(dir_);
  }
  SaveRequest request(int64_t step) {
    const test::SimRank& me = ranks_[static_cast<size_t>(world_->rank())];
    SaveRequest r;
    r.run_dir = dir_;
    r.step = step;
    r.coords = test::coords_string(me);
    r.tp_rank = me.tp;
    r.spans = me.spans;
    r.manifest.contract = {{"config", {{"model", config_.to_json()}}}};
    r.manifest.contract["hash"] = sha256_hex(r.manifest.contract.dump());
    r.manifest.contract_hash = r.manifest.contract["hash"];
    r.manifest.topology = topo_;
    r.manifest.optimizer_steps = step;
    r.manifest.loader_cursor = {{"next_step", step}};
    for (const test::SimRank& s : ranks_) r.rank_coords.push_back(test::coords_string(s));
    return r;
  }

  std::unique_ptr<comm::Communicator> world_;
  std::string dir_;
  model::LlamaConfig config_ = test::small_model();
  Topology topo_;
  std::vector<test::SimRank> ranks_;
};

TEST_F(CkptCommit, SaveVerifyAndLoadOnEveryRank) {
  auto out = save_checkpoint(*world_, request(3));
  ASSERT_TRUE(out.ok()) << out.status().message();  // every rank agrees, so ASSERT is safe here
  const CheckpointPaths paths(dir_);
  EXPECT_EQ(out->dir, paths.step_dir(3));
  EXPECT_TRUE(verify_checkpoint(paths, 3).ok()) << verify_checkpoint(paths, 3).message();
  // Each rank checks a different share of the SHA-256s; together they cover every shard.
  auto m = read_manifest(paths, 3);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(comm::agree(*world_, verify_shard_files(paths.step_dir(3), *m, world_->rank(), world_->size())).ok());
  // Every rank loads the whole model as a single device would hold it.
  auto source = CheckpointSource::open(paths.step_dir(3), *m, config_);
  ASSERT_TRUE(source.ok()) << source.status().message();
  std::vector<test::SimRank> one = test::simulate(config_, {1, 1, 1, 0, "tp-dp-pp"}, false);
  ASSERT_TRUE(source->fill(one[0].spans, 0).ok());
  std::vector<test::SimRank> want = test::simulate(config_, {1, 1, 1, 0, "tp-dp-pp"}, true);
  for (size_t i = 0; i < one[0].buffers.size(); ++i)
    EXPECT_EQ(std::memcmp(one[0].buffers[i].data(), want[0].buffers[i].data(), 4 * want[0].buffers[i].size()), 0);
}

TEST_F(CkptCommit, FullDiskOnTheLastRankFailsEveryRank) {
  ASSERT_TRUE(save_checkpoint(*world_, request(2)).ok());
  const CheckpointPaths paths(dir_);
  const std::string latest_before = read_file(paths.latest()).value();
  SaveRequest r = request(4);
  const int last = world_->size() - 1;
  r.fault = SaveFault{false, SavePhase::kShardWrite, 4, last};
  auto out = save_checkpoint(*world_, r);
  ASSERT_FALSE(out.ok());
  const std::string& msg = out.status().message();
  EXPECT_NE(msg.find(fmt::format("rank {}: ", last)), std::string::npos) << msg;
  EXPECT_NE(msg.find(shard_file_name(last)), std::string::npos) << msg;
  EXPECT_NE(msg.find("No space left on device"), std::string::npos) << msg;
  world_->barrier();
  EXPECT_FALSE(path_exists(paths.partial_dir(4)));
  EXPECT_FALSE(path_exists(paths.step_dir(4)));
  EXPECT_EQ(read_file(paths.latest()).value(), latest_before);
  EXPECT_TRUE(verify_checkpoint(paths, 2).ok());
  world_->barrier();
}

}  // namespace
}  // namespace sp::ckpt
