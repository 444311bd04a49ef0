// Reading a run's traces and checking them (trace_check.h): the rank files, the topology and the prediction
// are read here; the checks themselves are the Checker's (trace_checker.h).
#include "evidence/trace_check.h"

#include <algorithm>
#include <filesystem>

#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"
#include "evidence/trace_checker.h"
#include "evidence/trace_prediction.h"

namespace sp::evidence {

using comm::TraceRecord;
using nlohmann::json;
using trace_detail::Checker;

Result<RankTrace> parse_rank_trace(std::string_view text, int world_rank, const std::string& path) {
  RankTrace out{.world_rank = world_rank, .path = path};
  // A crash mid-write leaves at most a torn last line: tolerated and reported (docs/formats/trace.md).
  SP_ASSIGN_OR_RETURN(const JsonlDocument doc, parse_jsonl(text, path, TornTail::kAllow));
  out.torn_tail = doc.torn_bytes > 0;
  out.torn_bytes = doc.torn_bytes;
  for (size_t i = 0; i < doc.records.size(); ++i) {
    Result<TraceRecord> r = comm::trace_record_from_json(doc.records[i]);
    if (!r.ok()) return r.status().with_context(fmt::format("{}:{}", path, doc.line_numbers[i]));
    out.records.push_back(std::move(r).value());
  }
  return out;
}

TraceReport check_traces(std::vector<RankTrace> ranks, int world_size, const json* topology) {
  TraceReport report;
  report.world_size = world_size;
  report.topology_found = topology != nullptr;
  report.rank_files = static_cast<int>(ranks.size());
  Checker(report, ranks).run(topology);
  return report;
}

Result<TraceReport> check_trace_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const RunPaths paths(dir);
  const std::string trace_dir = paths.trace_dir();
  if (!fs::is_directory(dir, ec)) return invalid_argument("run directory '{}' does not exist", dir);
  if (!fs::is_directory(trace_dir, ec))
    return invalid_argument("'{}' has no trace/ directory", dir)
        .with_hint("pass the run directory (the one holding trace/rank-00000.jsonl and topology.json)");
  std::vector<TraceMismatch> file_problems;
  std::vector<std::string> warnings;
  std::vector<RankTrace> ranks;
  std::vector<std::string> ignored;
  SP_ASSIGN_OR_RETURN(const std::vector<RankFile> files, list_rank_files(trace_dir, &ignored));
  for (const std::string& p : ignored) warnings.push_back(fmt::format("ignored '{}': not a rank-NNNNN.jsonl file", p));
  for (const RankFile& f : files) {
    Result<std::string> text = read_file(f.path);
    Result<RankTrace> rt = text.ok() ? parse_rank_trace(*text, f.rank, f.path) : Result<RankTrace>(text.status());
    if (!rt.ok()) {
      file_problems.push_back({.kind = "corrupt_record", .ranks = {f.rank}, .message = rt.status().message()});
      ranks.push_back(RankTrace{.world_rank = f.rank, .path = f.path, .unreadable = true});
      continue;
    }
    ranks.push_back(std::move(rt).value());
  }
  if (ranks.empty())
    return invalid_argument("'{}' holds no rank-NNNNN.jsonl file", trace_dir).with_hint("was the run traced?");

  json topology;
  bool have_topology = false;
  const std::string topo_path = paths.topology();
  if (!path_exists(topo_path)) {
    warnings.push_back(fmt::format("{}: file does not exist; world size inferred from the traces", topo_path));
  } else if (Result<json> t = read_json_file(topo_path, uint64_t{1} << 28); t.ok()) {
    topology = std::move(t).value();
    have_topology = true;
  } else {
    file_problems.push_back({.kind = "topology", .message = t.status().message()});
  }
  int world = 0;
  if (have_topology && topology.is_object() && topology.contains("world_size") &&
      topology["world_size"].is_number_integer() && topology["world_size"].get<int64_t>() > 0 &&
      topology["world_size"].get<int64_t>() <= (1 << 24)) {
    world = topology["world_size"].get<int>();
  } else {
    for (const RankTrace& rt : ranks) {
      world = std::max(world, rt.world_rank + 1);
      for (const TraceRecord& r : rt.records)
        if (r.group == "world" && r.group_size <= (1 << 24)) world = std::max(world, r.group_size);
    }
  }
  TraceReport report;
  report.dir = dir;
  report.world_size = world;
  report.topology_found = have_topology;
  report.rank_files = static_cast<int>(ranks.size());
  Checker(report, ranks).run(have_topology ? &topology : nullptr);
  report.mismatches.insert(report.mismatches.begin(), file_problems.begin(), file_problems.end());
  if (path_exists(paths.comm_predicted())) {
    if (Result<json> p = read_json_file(paths.comm_predicted()); p.ok()) {
      compare_with_prediction(ranks, *p, report);
    } else {
      report.prediction_found = true;
      report.prediction_mismatches.push_back({.kind = "prediction", .message = p.status().message()});
    }
  }
  report.warnings.insert(report.warnings.begin(), warnings.begin(), warnings.end());
  return report;
}

}  // namespace sp::evidence
