// The parameter-server architecture's pure parts (docs/ps.md): the role map's arithmetic, the key
// space (every element owned exactly once, balanced by bytes), the configuration rules (each error
// names the keys and the fix, before any communication), topology.json's roles and key ranges
// (written, validated, and a tampered range refused), and the traffic prediction's concentration:
// a server receives W full gradients' worth of its keys per step.
#include "parallel/parameter_server.h"

#include <gtest/gtest.h>

#include "comm/roles.h"
#include "comm/topology.h"
#include "plan/run_plan.h"
#include "plan/traffic_model.h"
#include "unity_id.h"

namespace sp::parallel {
namespace {
namespace SP_TEST_ID {

config::RunConfig tiny() {
  nlohmann::json j = {
      {"model", {{"dim", 64}, {"n_layers", 2}, {"n_heads", 4}, {"n_kv_heads", 2}, {"ffn_dim", 96}, {"max_seq", 32}}},
      {"data", {{"vocab_size", 128}}},
      {"train", {{"global_batch", 8}, {"micro_batch_size", 2}, {"seq_len", 16}}}};
  auto c = config::RunConfig::from_json(j);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return *c;
}

config::RunConfig ps(int workers, int servers) {
  config::RunConfig c = tiny();
  c.parallel.architecture = config::Architecture::kParameterServer;
  c.parallel.dp = workers;
  c.parallel.servers = servers;
  return c;
}

std::string error_of(const config::RunConfig& c, int world) {
  auto p = plan::RunPlan::make(c, world);
  EXPECT_FALSE(p.ok());
  if (p.ok()) return "";
  EXPECT_EQ(p.status().exit_code(), 2);
  return p.status().message();
}

TEST(RoleMap, WorkersFirstThenServers) {
  auto r = comm::RoleMap::create(3, 2, 5);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->role_of(2), comm::Role::kWorker);
  EXPECT_EQ(r->role_of(3), comm::Role::kServer);
  EXPECT_EQ(r->server_index(4), 1);
  EXPECT_EQ(r->server_rank(0), 3);
  // 10 keys over 2 servers: [0, 5) and [5, 10); 11 keys: the first one longer.
  EXPECT_EQ(r->key_range(10, 1), (comm::KeyRange{5, 10}));
  EXPECT_EQ(r->key_range(11, 0), (comm::KeyRange{0, 6}));
  EXPECT_EQ(r->owner_of(11, 5), 0);
  EXPECT_EQ(r->owner_of(11, 6), 1);
  EXPECT_FALSE(comm::RoleMap::create(2, 3, 3).ok());  // servers ≥ world
  EXPECT_FALSE(comm::RoleMap::create(2, 1, 4).ok());  // world ≠ W + S
}

TEST(PsKeySpace, EveryElementOwnedExactlyOnceAndBalanced) {
  const config::RunConfig c = tiny();
  const std::vector<model::UnitLayout> layouts = plan::ps_unit_layouts(c.model);
  std::vector<const model::UnitLayout*> units;
  int64_t total = 0;
  for (const model::UnitLayout& u : layouts) {
    units.push_back(&u);
    total += u.numel;
  }
  for (int servers : {1, 2, 3}) {
    const comm::RoleMap roles = *comm::RoleMap::create(2, servers, 2 + servers);
    const plan::PsKeySpace keys(units, roles);
    EXPECT_EQ(keys.keys(), total);
    std::map<int, std::vector<int>> owners;  // unit → owner count per element
    for (const model::UnitLayout& u : layouts) owners[u.id].assign(static_cast<size_t>(u.numel), 0);
    int64_t smallest = total, largest = 0;
    for (int j = 0; j < servers; ++j) {
      int64_t mine = 0;
      for (const plan::PsPiece& p : keys.pieces(j)) {
        for (int64_t e = p.begin; e < p.end; ++e) ++owners[p.unit->id][static_cast<size_t>(e)];
        mine += p.size();
      }
      smallest = std::min(smallest, mine);
      largest = std::max(largest, mine);
    }
    EXPECT_LE(largest - smallest, 1) << servers << " servers";
    for (const auto& [unit, count] : owners)
      for (size_t e = 0; e < count.size(); ++e) ASSERT_EQ(count[e], 1) << "unit " << unit << " element " << e;
  }
}

TEST(PsPlan, ValidConfigurations) {
  for (auto [w, s] : {std::pair{1, 1}, {2, 1}, {4, 1}, {2, 2}, {4, 2}}) {
    auto p = plan::RunPlan::make(ps(w, s), w + s);
    ASSERT_TRUE(p.ok()) << w << "+" << s << ": " << p.status().to_string();
    EXPECT_EQ(p->roles().workers(), w);
    EXPECT_EQ(p->roles().servers(), s);
  }
}

TEST(PsPlan, BadInputNamesTheKeysAndTheFix) {
  EXPECT_NE(error_of(ps(2, 0), 2).find("parallel.servers ≥ 1"), std::string::npos);
  EXPECT_NE(error_of(ps(2, 3), 3).find("parallel.servers = 3 ≥ world size 3"), std::string::npos);
  EXPECT_NE(error_of(ps(2, 1), 4).find("world size 4 ≠ workers dp 2 × tp 1 × pp 1 + servers 1 = 3"), std::string::npos);
  config::RunConfig tp = ps(2, 1);
  tp.parallel.tp = 2;
  EXPECT_NE(error_of(tp, 5).find("parallel.architecture = \"ps\" with tp = 2"), std::string::npos);
  config::RunConfig zero = ps(2, 1);
  zero.parallel.zero = 1;
  EXPECT_NE(error_of(zero, 3).find("parallel.zero = 1 with parallel.architecture = \"ps\""), std::string::npos);
  config::RunConfig stale = tiny();
  stale.parallel.staleness = 2;
  EXPECT_NE(error_of(stale, 1).find("parallel.staleness = 2 needs parallel.architecture = \"ps\""), std::string::npos);
  config::RunConfig ssp = ps(2, 1);
  ssp.parallel.staleness = 1;  // the fixed schedule runs; the free-running mode is refused (staleness_test.cc)
  EXPECT_TRUE(plan::RunPlan::make(ssp, 3).ok());
  config::RunConfig servers = tiny();
  servers.parallel.servers = 1;
  EXPECT_NE(error_of(servers, 2).find("parallel.servers = 1 needs parallel.architecture = \"ps\""), std::string::npos);
}

TEST(PsPlan, KeysParseAndUnknownValuesAreRefused) {
  nlohmann::json j = tiny().to_json();
  j["parallel"]["architecture"] = "ps";
  j["parallel"]["servers"] = 2;
  auto c = config::RunConfig::from_json(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_TRUE(c->parallel.parameter_server());
  EXPECT_EQ(c->parallel.servers, 2);
  EXPECT_EQ(config::RunConfig::from_json(c->to_json())->to_json(), c->to_json());  // round trip
  j["parallel"]["architecture"] = "gossip";
  EXPECT_FALSE(config::RunConfig::from_json(j).ok());
  // An all-reduce contract does not mention the parameter-server keys (old contracts are unchanged).
  EXPECT_FALSE(tiny().to_json()["parallel"].contains("architecture"));
}

TEST(PsTopology, WrittenValidatedAndTamperingRefused) {
  auto plan = plan::RunPlan::make(ps(2, 2), 4);
  ASSERT_TRUE(plan.ok());
  auto grid = comm::ProcessGrid::create(2, 1, 1, "tp-dp-pp", 2);
  ASSERT_TRUE(grid.ok());
  const std::optional<comm::PsTopology> t = ps_topology(*plan);
  ASSERT_TRUE(t.has_value());
  std::vector<comm::RankInfo> ranks(4);
  for (int r = 0; r < 4; ++r) {
    ranks[static_cast<size_t>(r)].world_rank = r;
    if (r < 2)
      ranks[static_cast<size_t>(r)].coords = grid->coords_of(r);
    else
      ranks[static_cast<size_t>(r)].server = r - 2;
  }
  nlohmann::json doc = comm::topology_json(*grid, ranks, &*t);
  ASSERT_TRUE(comm::validate_topology(doc).ok()) << comm::validate_topology(doc).to_string();
  EXPECT_EQ(doc["world_size"], 4);
  EXPECT_EQ(doc["ranks"][3]["role"], "server");
  EXPECT_EQ(doc["key_ranges"][1]["end"], t->keys);
  nlohmann::json bad = doc;
  bad["key_ranges"][1]["begin"] = bad["key_ranges"][1]["begin"].get<int64_t>() + 1;
  const Status st = comm::validate_topology(bad);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("key_ranges[1]"), std::string::npos) << st.message();
  bad = doc;
  bad["ranks"][2]["role"] = "worker";
  EXPECT_FALSE(comm::validate_topology(bad).ok());
}

TEST(PsTraffic, OneServerReceivesEveryWorkersGradient) {
  for (int w : {2, 4}) {
    auto plan = plan::RunPlan::make(ps(w, 1), w + 1);
    ASSERT_TRUE(plan.ok());
    auto grid = comm::ProcessGrid::create(w, 1, 1, "tp-dp-pp", w);
    ASSERT_TRUE(grid.ok());
    int64_t params = 0;
    for (const model::UnitLayout& u : plan::ps_unit_layouts(plan->config.model)) params += u.numel;
    const plan::StepTraffic worker = plan::predict_step_traffic(*plan, *grid, 0, false, false);
    const plan::StepTraffic server = plan::predict_step_traffic(*plan, *grid, w, false, false);
    const std::pair<std::string, std::string> push{"ps", "push"}, pull{"ps", "pull"};
    EXPECT_EQ(worker.at(push).bytes, 4 * params);
    EXPECT_EQ(worker.at(pull).bytes, 4 * params);
    EXPECT_EQ(server.at(push).bytes, 4 * params * w);  // W full gradients in
    EXPECT_EQ(server.at(pull).bytes, 4 * params * w);  // W full parameter copies out
    EXPECT_FALSE(server.contains({"world", "forward"}));
    for (const auto& [key, t] : worker) EXPECT_NE(key.second, "grad_sync") << key.first;
  }
}

}  // namespace SP_TEST_ID
}  // namespace
}  // namespace sp::parallel
