#include "comm/topology.h"

#include <sched.h>
#include <unistd.h>

#include <numeric>

#include "comm/agree.h"
#include "core/file_io.h"

namespace sp::comm {
namespace {
using nlohmann::json;

json rank_info_json(const RankInfo& r) {
  return json{{"world_rank", r.world_rank},
              {"coords", {{"dp", r.coords.dp}, {"tp", r.coords.tp}, {"pp", r.coords.pp}}},
              {"host", r.host},
              {"pid", r.pid},
              {"cpu_affinity", r.cpu_affinity}};
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
}  // namespace

RankInfo local_rank_info(const ProcessGrid& grid, int world_rank) {
  RankInfo info;
  info.world_rank = world_rank;
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
  return info;
}

json topology_json(const ProcessGrid& grid, std::span<const RankInfo> ranks) {
  json doc;
  doc["format_version"] = kTopologyFormatVersion;
  doc["world_size"] = grid.world_size();
  doc["axis_order"] = grid.order_string();
  doc["dp"] = grid.dp_size();
  doc["tp"] = grid.tp_size();
  doc["pp"] = grid.pp_size();
  json rank_list = json::array();
  for (const RankInfo& r : ranks) rank_list.push_back(rank_info_json(r));
  doc["ranks"] = std::move(rank_list);
  json groups = json::object();
  for (Axis a : kAllAxes) groups[std::string(axis_name(a))] = grid.all_groups(a);
  doc["groups"] = std::move(groups);
  return doc;
}

Status write_topology(Communicator& world, const ProcessGrid& grid, const std::string& run_dir) {
  // Every rank sends its RankInfo as JSON text: first the lengths, then the bytes (gather needs counts).
  const std::string mine = rank_info_json(local_rank_info(grid, world.world_ranks()[world.rank()])).dump();
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
      info.coords = {j["coords"]["dp"].get<int>(), j["coords"]["tp"].get<int>(), j["coords"]["pp"].get<int>()};
      info.host = j["host"].get<std::string>();
      info.pid = j["pid"].get<int64_t>();
      info.cpu_affinity = j["cpu_affinity"].get<std::vector<int>>();
      ranks.push_back(std::move(info));
    }
    const json doc = topology_json(grid, ranks);
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
  SP_ASSIGN_OR_RETURN(const int64_t world, int_at(t, "world_size", "", 1, kMax));
  SP_ASSIGN_OR_RETURN(const int64_t dp, int_at(t, "dp", "", 1, kMax));
  SP_ASSIGN_OR_RETURN(const int64_t tp, int_at(t, "tp", "", 1, kMax));
  SP_ASSIGN_OR_RETURN(const int64_t pp, int_at(t, "pp", "", 1, kMax));
  if (!t.contains("axis_order") || !t["axis_order"].is_string())
    return corrupt("topology.json: axis_order is missing or not a string");
  if (dp * tp * pp > kMax) return corrupt("topology.json: dp {} × tp {} × pp {} is implausibly large", dp, tp, pp);
  Result<ProcessGrid> grid = ProcessGrid::create(static_cast<int>(dp), static_cast<int>(tp), static_cast<int>(pp),
                                                 t["axis_order"].get<std::string>(), static_cast<int>(world));
  if (!grid.ok()) return corrupt("topology.json: {}", grid.status().message());
  return grid;
}

Status validate_topology(const json& t) {
  SP_ASSIGN_OR_RETURN(const ProcessGrid grid, grid_from_topology(t));
  const int world = grid.world_size();
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
    if (!ranks[i].contains("coords")) return corrupt("topology.json: {}coords is missing", where);
    const Coords expected = grid.coords_of(static_cast<int>(rank));
    for (Axis a : kAllAxes) {
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
  return Status();
}

}  // namespace sp::comm
