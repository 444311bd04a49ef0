#include "evidence/trace_chrome.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "comm/topology.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"

namespace sp::evidence {
namespace {
using nlohmann::json;

// world rank → "dp0.tp1.pp0" from a valid topology.json; empty when there is none.
std::map<int, std::string> coords_by_rank(const json* topology) {
  std::map<int, std::string> out;
  if (topology == nullptr || !comm::validate_topology(*topology).ok()) return out;
  const comm::ProcessGrid grid = *comm::grid_from_topology(*topology);
  const comm::RoleMap roles = *comm::roles_from_topology(*topology);
  for (int r = 0; r < roles.world_size(); ++r) out[r] = roles.label(r, grid);  // "server0" for a server
  return out;
}

json metadata(const char* name, int pid, int tid, json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}
}  // namespace

json chrome_trace_from(const std::vector<RankTrace>& ranks, const json* topology) {
  // Tracks: every group name, "world" first, then sorted; tid = index + 1 (tid 0 stays unused).
  std::set<std::string> names;
  int64_t t0 = std::numeric_limits<int64_t>::max();
  for (const RankTrace& rt : ranks) {
    for (const comm::TraceRecord& r : rt.records) {
      names.insert(r.group);
      t0 = std::min(t0, r.t_start_us);
    }
  }
  std::vector<std::string> order(names.begin(), names.end());
  std::stable_partition(order.begin(), order.end(), [](const std::string& n) { return n == "world"; });
  std::map<std::string, int> tid;
  for (size_t i = 0; i < order.size(); ++i) tid[order[i]] = static_cast<int>(i) + 1;
  if (t0 == std::numeric_limits<int64_t>::max()) t0 = 0;

  const std::map<int, std::string> coords = coords_by_rank(topology);
  json events = json::array();
  for (const RankTrace& rt : ranks) {
    const int pid = rt.world_rank;
    const auto c = coords.find(pid);
    const std::string pname =
        c == coords.end() ? fmt::format("rank {}", pid) : fmt::format("rank {} ({})", pid, c->second);
    events.push_back(metadata("process_name", pid, 0, {{"name", pname}}));
    events.push_back(metadata("process_sort_index", pid, 0, {{"sort_index", pid}}));
    std::set<std::string> mine;
    for (const comm::TraceRecord& r : rt.records) mine.insert(r.group);
    for (const std::string& g : mine) {
      events.push_back(metadata("thread_name", pid, tid[g], {{"name", g}}));
      events.push_back(metadata("thread_sort_index", pid, tid[g], {{"sort_index", tid[g]}}));
    }
    for (const comm::TraceRecord& r : rt.records) {
      json args = {{"group", r.group},
                   {"seq", r.seq},
                   {"count", r.count},
                   {"bytes", r.bytes},
                   {"wire_bytes", r.wire_bytes},
                   {"phase", comm::phase_name(r.phase)},
                   {"step", r.step},
                   {"micro_batch", r.micro_batch}};
      if (r.op != comm::OpKind::kBarrier) args["dtype"] = dtype_name(r.dtype);
      if (r.reduce) args["reduce"] = comm::reduce_op_name(*r.reduce);
      if (r.root >= 0) args["root_world"] = r.root_world;
      if (r.peer >= 0) {
        args["peer_world"] = r.peer_world;
        args["tag"] = r.tag;
      }
      std::string name(comm::op_kind_name(r.op));
      if (r.timed_out) {
        name += " (timed out)";
        args["timed_out"] = true;
      }
      events.push_back({{"name", name},
                        {"cat", comm::phase_name(r.phase)},
                        {"ph", "X"},
                        {"ts", r.t_start_us - t0},
                        {"dur", r.timed_out ? 0 : std::max<int64_t>(r.t_end_us - r.t_start_us, 0)},
                        {"pid", pid},
                        {"tid", tid[r.group]},
                        {"args", std::move(args)}});
    }
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}, {"otherData", {{"t0_us", t0}}}};
}

Result<json> chrome_trace(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const RunPaths paths(dir);
  if (!fs::is_directory(paths.trace_dir(), ec))
    return invalid_argument("'{}' has no trace/ directory", dir)
        .with_hint("pass the run directory (the one holding trace/rank-00000.jsonl)");
  SP_ASSIGN_OR_RETURN(const std::vector<RankFile> files, list_rank_files(paths.trace_dir()));
  std::vector<RankTrace> ranks;
  for (const RankFile& f : files) {
    SP_ASSIGN_OR_RETURN(const std::string text, read_file(f.path));
    SP_ASSIGN_OR_RETURN(RankTrace rt, parse_rank_trace(text, f.rank, f.path));
    ranks.push_back(std::move(rt));
  }
  if (ranks.empty()) return invalid_argument("'{}' holds no rank-NNNNN.jsonl file", paths.trace_dir());
  const Result<json> topology = read_json_file(paths.topology(), uint64_t{1} << 28);
  return chrome_trace_from(ranks, topology.ok() ? &*topology : nullptr);
}

Status write_chrome_trace(const std::string& dir, const std::string& out_path) {
  SP_ASSIGN_OR_RETURN(const json trace, chrome_trace(dir));
  return write_file_atomic(out_path, trace.dump() + "\n");
}

}  // namespace sp::evidence
