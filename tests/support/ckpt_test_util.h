// Test helpers for checkpoints without the engine: a one-rank Communicator, a small model, and a
// simulated job of any (dp, tp, pp, zero) whose ranks hold their state the way the engine does
// (model::unit_layout per tp rank, units split over pp, the unit flat buffer split over dp under
// ZeRO), with every value a pure function of (kind, tensor, logical index) — so a loaded value can
// be checked against its closed form, whatever topology saved or loaded it.
#pragma once

#include <fmt/format.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/format.h"
#include "ckpt/manifest.h"
#include "ckpt/names.h"
#include "ckpt/save.h"
#include "ckpt/shard.h"
#include "comm/communicator.h"
#include "core/check.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "model/weights.h"

namespace sp::ckpt::test {

// World of one rank: every collective is a copy (or nothing).
class LocalCommunicator final : public comm::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& name() const override { return name_; }
  std::span<const int> world_ranks() const override { return {ranks_, 1}; }
  void all_reduce(void*, int64_t, DType, comm::ReduceOp) override {}
  void reduce_scatter(const void* send, void* recv, std::span<const int64_t> counts, DType t, comm::ReduceOp) override {
    std::memcpy(recv, send, static_cast<size_t>(counts[0]) * dtype_size(t));
  }
  void all_gather(const void* send, void* recv, std::span<const int64_t> counts, DType t) override {
    std::memcpy(recv, send, static_cast<size_t>(counts[0]) * dtype_size(t));
  }
  void all_to_all(const void* send, std::span<const int64_t> sc, void* recv, std::span<const int64_t>,
                  DType t) override {
    std::memcpy(recv, send, static_cast<size_t>(sc[0]) * dtype_size(t));
  }
  void broadcast(void*, int64_t, DType, int) override {}
  void gather(const void* send, int64_t count, void* recv, std::span<const int64_t>, DType t, int) override {
    std::memcpy(recv, send, static_cast<size_t>(count) * dtype_size(t));
  }
  void send(const void*, int64_t, DType, int, int) override { SP_CHECK(false, "no peers"); }
  void recv(void*, int64_t, DType, int, int) override { SP_CHECK(false, "no peers"); }
  std::unique_ptr<comm::Request> isend(const void*, int64_t, DType, int, int) override { SP_CHECK(false, "no peers"); }
  std::unique_ptr<comm::Request> irecv(void*, int64_t, DType, int, int) override { SP_CHECK(false, "no peers"); }
  void barrier() override {}

 private:
  std::string name_ = "world";
  int ranks_[1] = {0};
};

inline model::LlamaConfig small_model(bool tie = false) {
  model::LlamaConfig c;
  c.vocab_size = 64;
  c.dim = 16;
  c.n_layers = 4;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 24;
  c.max_seq = 16;
  c.tie_embeddings = tie;
  return c;
}

// The closed form every simulated state holds. Replicated tensors also depend on the tp rank that
// holds them, so a test can see which copy a load took.
inline float state_value(StateKind kind, const std::string& tensor, int64_t logical, int replica_tp) {
  const uint64_t h = xxh3_64(fmt::format("{}|{}|{}|{}", static_cast<int>(kind), tensor, logical, replica_tp));
  return static_cast<float>(static_cast<int64_t>(h % 2000001) - 1000000) * 1e-6f;
}

// One simulated rank: its units, buffers and owned spans.
struct SimRank {
  int rank = 0, dp = 0, tp = 0, pp = 0;
  std::vector<std::unique_ptr<model::UnitLayout>> units;
  std::vector<std::vector<float>> buffers;  // per (span, kind): 3 per span
  std::vector<StateSpan> spans;
  bool saver = true;
};

inline std::vector<int> units_of_stage(const model::LlamaConfig& c, int pp_rank, int pp) {
  const int L = static_cast<int>(c.n_layers);
  std::vector<int> ids;
  for (int l = L * pp_rank / pp; l < L * (pp_rank + 1) / pp; ++l) ids.push_back(1 + l);
  if (pp_rank == 0) ids.insert(ids.begin(), 0);
  if (pp_rank == pp - 1) ids.push_back(L + 1);
  return ids;
}

// Ranks ordered tp-dp-pp (tp fastest), like the default axis order.
inline std::vector<SimRank> simulate(const model::LlamaConfig& c, const Topology& t, bool fill_values) {
  std::vector<SimRank> out;
  for (int rank = 0; rank < t.world(); ++rank) {
    SimRank r;
    r.rank = rank;
    r.tp = rank % t.tp;
    r.dp = (rank / t.tp) % t.dp;
    r.pp = rank / (t.tp * t.dp);
    r.saver = t.zero > 0 || r.dp == 0;
    for (int id : units_of_stage(c, r.pp, t.pp)) {
      r.units.push_back(std::make_unique<model::UnitLayout>(model::unit_layout(c, id, r.tp, t.tp)));
      const model::UnitLayout& u = *r.units.back();
      // ZeRO splits the flat buffer over dp (any split is a valid test; this one is uneven for dp 3).
      const int64_t b = t.zero > 0 ? u.numel * r.dp / t.dp : 0;
      const int64_t e = t.zero > 0 ? u.numel * (r.dp + 1) / t.dp : u.numel;
      StateSpan s{&u, b, e, {}};
      for (StateKind k : kStateKinds) {
        r.buffers.emplace_back(static_cast<size_t>(e - b), std::nanf(""));
        std::vector<float>& buf = r.buffers.back();
        s.data[static_cast<size_t>(k)] = buf.data();
        if (!fill_values) continue;
        for (const model::TensorSlot& slot : u.tensors)
          for (int64_t x = std::max(b, slot.offset); x < std::min(e, slot.offset + slot.numel); ++x)
            buf[static_cast<size_t>(x - b)] =
                state_value(k, slot.spec.name, slot.logical_index(x - slot.offset), slot.spec.tp_dim < 0 ? r.tp : -1);
      }
      r.spans.push_back(s);
    }
    out.push_back(std::move(r));
  }
  return out;
}

inline std::string coords_string(const SimRank& r) { return fmt::format("dp{}.tp{}.pp{}", r.dp, r.tp, r.pp); }

// Writes a complete, committed checkpoint of a simulated job (what save_checkpoint does collectively).
inline Manifest write_sim_checkpoint(const std::string& run_dir, int64_t step, const model::LlamaConfig& c,
                                     const Topology& t) {
  const CheckpointPaths paths(run_dir);
  const std::vector<SimRank> ranks = simulate(c, t, true);
  const std::string dir = paths.step_dir(step);
  SP_CHECK(make_directories(dir).ok(), "mkdir");
  Manifest m;
  m.step = step;
  m.contract = {{"config", {{"model", c.to_json()}}}};
  m.contract["hash"] = sha256_hex(m.contract.dump());
  m.contract_hash = m.contract["hash"];
  m.topology = t;
  m.optimizer_steps = step;
  m.loader_cursor = {{"next_step", step}};
  for (const SimRank& r : ranks) {
    const ShardImage img =
        build_shard(r.rank, coords_string(r), r.tp, step, r.saver ? r.spans : std::vector<StateSpan>{});
    const Status st = img.writer.write(CheckpointPaths::shard_in(dir, r.rank));
    SP_CHECK(st.ok(), "{}", st.message());
    m.shards.push_back({r.rank, coords_string(r), shard_file_name(r.rank), img.bytes, img.sha256, img.sha256_chunks});
  }
  m.seal();
  SP_CHECK(write_file(CheckpointPaths::manifest_in(dir), m.to_text()).ok(), "manifest");
  SP_CHECK(write_file_atomic(paths.latest(), Latest{step, m.digest}.to_text()).ok(), "LATEST");
  return m;
}

}  // namespace sp::ckpt::test
