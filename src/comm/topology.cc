#include "comm/topology.h"

#include <sched.h>
#include <unistd.h>

#include <numeric>

#include "comm/agree.h"
#include "core/file_io.h"
#include "kernels/blas_core.h"

namespace sp::comm {
namespace {
using nlohmann::json;

json rank_info_json(const RankInfo& r) {
  json j = {{"world_rank", r.world_rank}, {"host", r.host}, {"pid", r.pid}, {"cpu_affinity", r.cpu_affinity}};
  if (!r.blas_core.empty()) j["blas_core"] = r.blas_core;
  if (r.server >= 0) {
    j["role"] = role_name(Role::kServer);
    j["server"] = r.server;
  } else {
    j["coords"] = {{"dp", r.coords.dp}, {"tp", r.coords.tp}, {"pp", r.coords.pp}};
  }
  return j;
}

bool is_int(const json& j, const char* key) { return j.contains(key) && j[key].is_number_integer(); }

// Reads an integer in [lo, hi] at `key` of object `j`; `where` names the object in errors.
Result<int64_t> int_at(const json& j, const char* key, const std::string& where, int64_t lo, int64_t hi) {
  if (!j.is_object() || !is_int(j, key)) return corrupt("topology.json: {}{} is missing or not an integer", where, key);
  if (j[key].is_number_unsigned() && j[key].get<uint64_t>() > static_cast<uint64_t>(hi))
    return corrupt("topology.json: {}{} is out of range", where, key);
  const int64_t v = j[key].get<int64_t>();
  if (v < lo || v > hi) return corrupt("topology.json: {}{} = {} is outside [{}, {}]", where, key, v, lo, hi);
  return v;
}
// The parameter-server part: groups.ps holds every rank; key_ranges are the even split of `keys`.
Status validate_ps_topology(const json& t, const RoleMap& roles) {
  std::vector<int> all(static_cast<size_t>(roles.world_size()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  const std::string ps(kPsGroupName);
  if (!t["groups"].contains(ps) || t["groups"][ps] != json(std::vector<std::vector<int>>{all}))
    return corrupt("topology.json: groups.{} must be the one group of every rank [0 … {}]", ps, roles.world_size() - 1);
  SP_ASSIGN_OR_RETURN(const int64_t keys, int_at(t, "keys", "", roles.servers(), int64_t{1} << 50));
  if (!t.contains("key_ranges") || !t["key_ranges"].is_array() ||
      t["key_ranges"].size() != static_cast<size_t>(roles.servers()))
    return corrupt("topology.json: key_ranges must list the {} servers", roles.servers());
  for (int j = 0; j < roles.servers(); ++j) {
    const json& e = t["key_ranges"][static_cast<size_t>(j)];
    const std::string where = fmt::format("key_ranges[{}].", j);
    const KeyRange want = roles.key_range(keys, j);
    SP_ASSIGN_OR_RETURN(const int64_t server, int_at(e, "server", where, 0, roles.servers() - 1));
    SP_ASSIGN_OR_RETURN(const int64_t rank, int_at(e, "rank", where, 0, roles.world_size() - 1));
    SP_ASSIGN_OR_RETURN(const int64_t begin, int_at(e, "begin", where, 0, keys));
    SP_ASSIGN_OR_RETURN(const int64_t end, int_at(e, "end", where, 0, keys));
    SP_ASSIGN_OR_RETURN(const int64_t bytes, int_at(e, "bytes", where, 0, int64_t{4} << 50));
    if (server != j || rank != roles.server_rank(j) || begin != want.begin || end != want.end ||
        bytes != 4 * want.size())
      return corrupt(
          "topology.json: {} is server {} on rank {} with keys [{}, {}) ({} bytes), but {} keys over {} "
          "servers give server {} on rank {} keys [{}, {}) ({} bytes)",
          where.substr(0, where.size() - 1), server, rank, begin, end, bytes, keys, roles.servers(), j,
          roles.server_rank(j), want.begin, want.end, 4 * want.size());
  }
  return Status();
}

}  // namespace

RankInfo local_rank_info(const ProcessGrid& grid, int world_rank, const RoleMap* roles) {
  RankInfo info;
  info.world_rank = world_rank;
  if (roles != nullptr && roles->is_server(world_rank))
    info.server = roles->server_index(world_rank);
  else
    info.coords = grid.coords_of(world_rank);
  char host[256] = {};
  info.host = gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0' ? host : "unknown";
  info.pid = static_cast<int64_t>(getpid());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) info.cpu_affinity.push_back(cpu);
  }
  info.blas_core = kernels::blas_core();
  return info;
}

json topology_json(const ProcessGrid& grid, std::span<const RankInfo> ranks, const PsTopology* ps) {
  json doc;
  doc["format_version"] = kTopologyFormatVersion;
  doc["world_size"] = grid.world_size() + (ps != nullptr ? ps->roles.servers() : 0);
  doc["axis_order"] = grid.order_string();
  doc["dp"] = grid.dp_size();
  doc["tp"] = grid.tp_size();
  doc["pp"] = grid.pp_size();
  json rank_list = json::array();
  for (const RankInfo& r : ranks) {
    json e = rank_info_json(r);
    if (ps != nullptr && r.server < 0) e["role"] = role_name(Role::kWorker);
    rank_list.push_back(std::move(e));
  }
  doc["ranks"] = std::move(rank_list);
  json groups = json::object();
  for (Axis a : kAllAxes) groups[std::string(axis_name(a))] = grid.all_groups(a);
  if (ps != nullptr) {
    std::vector<int> all(static_cast<size_t>(ps->roles.world_size()));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    groups[std::string(kPsGroupName)] = std::vector<std::vector<int>>{all};
    doc["architecture"] = "ps";
    doc["servers"] = ps->roles.servers();
    doc["keys"] = ps->keys;
    json ranges = json::array();
    for (int j = 0; j < ps->roles.servers(); ++j) {
      const KeyRange k = ps->roles.key_range(ps->keys, j);
      json e = {{"server", j},
                {"rank", ps->roles.server_rank(j)},
                {"begin", k.begin},
                {"end", k.end},
                {"bytes", 4 * k.size()}};
      if (static_cast<size_t>(j) < ps->pieces.size()) e["pieces"] = ps->pieces[static_cast<size_t>(j)];
      ranges.push_back(std::move(e));
    }
    doc["key_ranges"] = std::move(ranges);
  }
  doc["groups"] = std::move(groups);
  return doc;
}

Status write_topology(Communicator& world, const ProcessGrid& grid, const std::string& run_dir, const PsTopology* ps) {
  // Every rank sends its RankInfo as JSON text: first the lengths, then the bytes (gather needs counts).
  const std::string mine =
      rank_info_json(local_rank_info(grid, world.world_ranks()[world.rank()], ps != nullptr ? &ps->roles : nullptr))
          .dump();
  const int n = world.size();
  std::vector<int64_t> lengths(static_cast<size_t>(n), 0);
  int64_t my_length = static_cast<int64_t>(mine.size());
  world.all_gather(&my_length, lengths.data(), std::vector<int64_t>(static_cast<size_t>(n), 1), DType::kI64);
  const int64_t total = std::accumulate(lengths.begin(), lengths.end(), int64_t{0});
  std::string all(world.rank() == 0 ? static_cast<size_t>(total) : 0, '\0');
  world.gather(mine.data(), my_length, world.rank() == 0 ? all.data() : nullptr, lengths, DType::kU8, 0);

  Status status;
  if (world.rank() == 0) {
    std::vector<RankInfo> ranks;
    size_t offset = 0;
    for (int r = 0; r < n; ++r) {
      const json j = json::parse(all.substr(offset, static_cast<size_t>(lengths[static_cast<size_t>(r)])));
      offset += static_cast<size_t>(lengths[static_cast<size_t>(r)]);
      RankInfo info;
      info.world_rank = j["world_rank"].get<int>();
      if (j.contains("server"))
        info.server = j["server"].get<int>();
      else
        info.coords = {j["coords"]["dp"].get<int>(), j["coords"]["tp"].get<int>(), j["coords"]["pp"].get<int>()};
      info.host = j["host"].get<std::string>();
      info.pid = j["pid"].get<int64_t>();
      info.cpu_affinity = j["cpu_affinity"].get<std::vector<int>>();
      info.blas_core = j.value("blas_core", std::string());
      ranks.push_back(std::move(info));
    }
    const json doc = topology_json(grid, ranks, ps);
    status = validate_topology(doc);  // an inconsistent grid is a bug, but report it rather than write it
    if (status.ok()) status = make_directories(run_dir);
    if (status.ok()) status = write_file_atomic(fmt::format("{}/{}", run_dir, kTopologyFileName), doc.dump(2) + "\n");
  }
  return agree(world, status);  // rank 0's error, word for word, on every rank
}

Result<ProcessGrid> grid_from_topology(const json& t) {
  if (!t.is_object()) return corrupt("topology.json: the document is not a JSON object");
  SP_ASSIGN_OR_RETURN(const int64_t version, int_at(t, "format_version", "", 1, 1 << 20));
  if (version != kTopologyFormatVersion)
    return corrupt("topology.json: format_version {} is not the supported {}", version, kTopologyFormatVersion);
  constexpr int64_t kMax = 1 << 24;
  SP_ASSIGN_OR_RETURN(const int64_t world_size, int_at(t, "world_size", "", 1, kMax));
  int64_t servers = 0;
  if (t.contains("architecture")) {
    if (t["architecture"] != "ps") return corrupt("topology.json: architecture is not \"ps\" (the only value written)");
    SP_ASSIGN_OR_RETURN(servers, int_at(t, "servers", "", 1, world_size - 1));
  }
  const int64_t world = world_size - servers;
  SP_ASSIGN_OR_RETURN(const int64_t dp, int_at(t, "dp", "", 1, kMax));
  SP_ASSIGN_OR_RETURN(const int64_t tp, int_at(t, "tp", "", 1, kMax));
  SP_ASSIGN_OR_RETURN(const int64_t pp, int_at(t, "pp", "", 1, kMax));
  if (!t.contains("axis_order") || !t["axis_order"].is_string())
    return corrupt("topology.json: axis_order is missing or not a string");
  if (dp * tp * pp > kMax) return corrupt("topology.json: dp {} × tp {} × pp {} is implausibly large", dp, tp, pp);
  Result<ProcessGrid> grid = ProcessGrid::create(static_cast<int>(dp), static_cast<int>(tp), static_cast<int>(pp),
                                                 t["axis_order"].get<std::string>(), static_cast<int>(world));
  if (!grid.ok())
    return corrupt("topology.json: {}{}", grid.status().message(),
                   servers > 0 ? fmt::format(" (world_size {} − servers {})", world_size, servers) : "");
  return grid;
}

Result<RoleMap> roles_from_topology(const json& t) {
  SP_ASSIGN_OR_RETURN(const ProcessGrid grid, grid_from_topology(t));
  const int world = t["world_size"].get<int>();
  auto roles = RoleMap::create(grid.world_size(), world - grid.world_size(), world);
  if (!roles.ok()) return corrupt("topology.json: {}", roles.status().message());
  return roles;
}

Status validate_topology(const json& t) {
  SP_ASSIGN_OR_RETURN(const ProcessGrid grid, grid_from_topology(t));
  SP_ASSIGN_OR_RETURN(const RoleMap roles, roles_from_topology(t));
  const int world = roles.world_size();
  if (!t.contains("ranks") || !t["ranks"].is_array()) return corrupt("topology.json: ranks is missing or not an array");
  const json& ranks = t["ranks"];
  if (ranks.size() != static_cast<size_t>(world))
    return corrupt("topology.json: ranks has {} entries, world_size is {}", ranks.size(), world);
  std::vector<bool> seen(static_cast<size_t>(world), false);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::string where = fmt::format("ranks[{}].", i);
    SP_ASSIGN_OR_RETURN(const int64_t rank, int_at(ranks[i], "world_rank", where, 0, world - 1));
    if (seen[static_cast<size_t>(rank)]) return corrupt("topology.json: {}world_rank {} appears twice", where, rank);
    seen[static_cast<size_t>(rank)] = true;
    if (roles.parameter_server()) {
      const Role role = roles.role_of(static_cast<int>(rank));
      if (!ranks[i].contains("role") || ranks[i]["role"] != role_name(role))
        return corrupt("topology.json: {}role is missing or not \"{}\" (rank {} of {} workers + {} servers)", where,
                       role_name(role), rank, roles.workers(), roles.servers());
      if (role == Role::kServer) {
        SP_ASSIGN_OR_RETURN(const int64_t j, int_at(ranks[i], "server", where, 0, roles.servers() - 1));
        if (j != roles.server_index(static_cast<int>(rank)))
          return corrupt("topology.json: {}server = {} but rank {} is server {}", where, j, rank,
                         roles.server_index(static_cast<int>(rank)));
      }
    }
    const bool server = roles.is_server(static_cast<int>(rank));
    if (!server && !ranks[i].contains("coords")) return corrupt("topology.json: {}coords is missing", where);
    const Coords expected = server ? Coords{} : grid.coords_of(static_cast<int>(rank));
    for (Axis a : kAllAxes) {
      if (server) break;  // a server has no grid coordinates
      const std::string axis(axis_name(a));
      SP_ASSIGN_OR_RETURN(const int64_t c,
                          int_at(ranks[i]["coords"], axis.c_str(), where + "coords.", 0, grid.size(a) - 1));
      if (c != expected[a])
        return corrupt("topology.json: {}coords.{} = {} but rank {} is {} under {}", where, axis, c, rank,
                       expected.to_string(), grid.describe());
    }
    if (!ranks[i].contains("host") || !ranks[i]["host"].is_string())
      return corrupt("topology.json: {}host is missing or not a string", where);
    SP_RETURN_IF_ERROR(int_at(ranks[i], "pid", where, 0, INT64_MAX).status());
    if (!ranks[i].contains("cpu_affinity") || !ranks[i]["cpu_affinity"].is_array())
      return corrupt("topology.json: {}cpu_affinity is missing or not an array", where);
  }
  if (!t.contains("groups") || !t["groups"].is_object()) return corrupt("topology.json: groups is missing");
  for (Axis a : kAllAxes) {
    const std::string axis(axis_name(a));
    if (!t["groups"].contains(axis)) return corrupt("topology.json: groups.{} is missing", axis);
    const json& listed = t["groups"][axis];
    const std::vector<std::vector<int>> expected = grid.all_groups(a);
    json want = expected;
    if (listed != want) {
      // Name the first group that differs, so a hand-edited or stale file is easy to fix.
      for (size_t g = 0; g < expected.size(); ++g) {
        if (!listed.is_array() || g >= listed.size() || listed[g] != want[g])
          return corrupt("topology.json: groups.{}[{}] = {} but the grid {} gives {}", axis, g,
                         listed.is_array() && g < listed.size() ? listed[g].dump() : "(missing)", grid.describe(),
                         want[g].dump());
      }
      return corrupt("topology.json: groups.{} has {} groups, the grid gives {}", axis, listed.size(), expected.size());
    }
  }
  if (roles.parameter_server()) return validate_ps_topology(t, roles);
  if (t.contains("key_ranges") || t["groups"].contains(std::string(kPsGroupName)))
    return corrupt("topology.json: key_ranges or groups.ps without architecture \"ps\"");
  return Status();
}

}  // namespace sp::comm
