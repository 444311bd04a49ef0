// What the bubble is computed from (bubble.h): a run's timeline/rank-NNNNN.jsonl files, the pipeline shape its
// contract fixes and each rank's place in the pipeline groups of its topology.json.
#include <fmt/format.h>

#include <filesystem>

#include "comm/topology.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bubble.h"
#include "evidence/bundle_paths.h"

namespace sp::evidence {
namespace {

using nlohmann::json;

Result<int64_t> int_field(const json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return corrupt("{}: missing or non-integer field '{}'", where, key);
  return it->get<int64_t>();
}

Result<const json*> path_of(const json& j, std::initializer_list<const char*> keys, const std::string& file) {
  const json* cur = &j;
  std::string name;
  for (const char* k : keys) {
    name += name.empty() ? k : std::string(".") + k;
    if (!cur->is_object() || !cur->contains(k)) return corrupt("{}: missing key '{}'", file, name);
    cur = &(*cur)[k];
  }
  return cur;
}

// A split line: {"step", "step_us", "split_us": {kind: µs, …, "other": µs}} with every kind, nothing else.
Result<StepTimeSplit> parse_split(const json& j, const std::string& where) {
  StepTimeSplit s;
  SP_ASSIGN_OR_RETURN(s.step, int_field(j, "step", where));
  SP_ASSIGN_OR_RETURN(s.step_us, int_field(j, "step_us", where));
  const json& parts = j["split_us"];
  if (!parts.is_object() || parts.size() != kTimeKinds + 1)
    return corrupt("{}: 'split_us' is not an object of the {} kinds and '{}'", where, kTimeKinds, kOtherTime);
  int64_t sum = 0;
  for (size_t k = 0; k <= kTimeKinds; ++k) {
    const char* name = k < kTimeKinds ? kTimeKindNames[k].data() : kOtherTime.data();
    SP_ASSIGN_OR_RETURN(s.us[k], int_field(parts, name, where + ": split_us"));
    if (s.us[k] < 0) return corrupt("{}: split_us.{} is negative ({})", where, name, s.us[k]);
    sum += s.us[k];
  }
  if (sum != s.step_us) return corrupt("{}: split_us sums to {} µs, step_us is {}", where, sum, s.step_us);
  return s;
}

}  // namespace

Result<std::vector<TimelineInterval>> parse_timeline(std::string_view text, const std::string& path,
                                                     std::vector<StepTimeSplit>* splits) {
  std::vector<TimelineInterval> out;
  SP_ASSIGN_OR_RETURN(const JsonlDocument doc, parse_jsonl(text, path));
  for (size_t i = 0; i < doc.records.size(); ++i) {
    const json& j = doc.records[i];
    const std::string where = fmt::format("{}:{}", path, doc.line_numbers[i]);
    if (j.is_object() && j.contains("split_us")) {
      SP_ASSIGN_OR_RETURN(StepTimeSplit s, parse_split(j, where));
      if (splits != nullptr) splits->push_back(s);
      continue;
    }
    TimelineInterval iv;
    SP_ASSIGN_OR_RETURN(iv.step, int_field(j, "step", where));
    SP_ASSIGN_OR_RETURN(iv.micro_batch, int_field(j, "micro_batch", where));
    SP_ASSIGN_OR_RETURN(iv.t0_us, int_field(j, "t0_us", where));
    SP_ASSIGN_OR_RETURN(iv.t1_us, int_field(j, "t1_us", where));
    SP_ASSIGN_OR_RETURN(const int64_t vs, int_field(j, "virtual_stage", where));
    iv.virtual_stage = static_cast<int>(vs);
    auto kind = j.find("kind");
    if (kind == j.end() || !kind->is_string()) return corrupt("{}: missing or non-string field 'kind'", where);
    iv.kind = kind->get<std::string>();
    if (j.contains("unit")) {
      SP_ASSIGN_OR_RETURN(const int64_t unit, int_field(j, "unit", where));
      iv.unit = static_cast<int>(unit);
    }
    if (iv.t1_us < iv.t0_us)
      return corrupt("{}: interval ends (t1_us {}) before it starts (t0_us {})", where, iv.t1_us, iv.t0_us);
    out.push_back(std::move(iv));
  }
  return out;
}

Result<PipelineShape> pipeline_shape_of(const json& contract) {
  const std::string file = "contract.json";
  PipelineShape s;
  SP_ASSIGN_OR_RETURN(const json* par, path_of(contract, {"config", "parallel"}, file));
  SP_ASSIGN_OR_RETURN(const json* train, path_of(contract, {"config", "train"}, file));
  const auto get_int = [&](const json& obj, const char* key, const char* section) -> Result<int64_t> {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_integer())
      return corrupt("{}: missing or non-integer key 'config.{}.{}'", file, section, key);
    return it->get<int64_t>();
  };
  SP_ASSIGN_OR_RETURN(const int64_t dp, get_int(*par, "dp", "parallel"));
  SP_ASSIGN_OR_RETURN(const int64_t tp, get_int(*par, "tp", "parallel"));
  SP_ASSIGN_OR_RETURN(const int64_t pp, get_int(*par, "pp", "parallel"));
  SP_ASSIGN_OR_RETURN(const int64_t v, get_int(*par, "virtual_stages", "parallel"));
  SP_ASSIGN_OR_RETURN(const int64_t gb, get_int(*train, "global_batch", "train"));
  SP_ASSIGN_OR_RETURN(const int64_t mbs, get_int(*train, "micro_batch_size", "train"));
  auto sched = par->find("schedule");
  if (sched == par->end() || !sched->is_string()) return corrupt("{}: missing key 'config.parallel.schedule'", file);
  if (dp < 1 || tp < 1 || pp < 1 || v < 1 || mbs < 1 || gb < mbs * dp)
    return corrupt(
        "{}: config.parallel dp {} tp {} pp {} virtual_stages {} with train.global_batch {} and "
        "micro_batch_size {} is not a valid run",
        file, dp, tp, pp, v, gb, mbs);
  s.dp = static_cast<int>(dp);
  s.tp = static_cast<int>(tp);
  s.pp = static_cast<int>(pp);
  s.virtual_stages = static_cast<int>(v);
  s.schedule = sched->get<std::string>();
  s.micro_batches = gb / mbs / dp;
  return s;
}

Result<std::vector<PipelinePlace>> pipeline_places_of(const json& topology) {
  const std::string file(comm::kTopologyFileName);
  SP_ASSIGN_OR_RETURN(const json* groups, path_of(topology, {"groups", "pp"}, file));
  auto ws = topology.find("world_size");
  if (ws == topology.end() || !ws->is_number_integer() || ws->get<int64_t>() < 1 || ws->get<int64_t>() > (1 << 20))
    return corrupt("{}: missing or invalid 'world_size'", file);
  // A parameter-server run's servers (ranks after the workers, docs/ps.md) belong to no pipeline.
  const auto sv = topology.find("servers");
  const int servers = sv != topology.end() && sv->is_number_integer() && sv->get<int64_t>() > 0 &&
                              sv->get<int64_t>() < ws->get<int64_t>()
                          ? sv->get<int>()
                          : 0;
  const int world = ws->get<int>() - servers;
  std::vector<PipelinePlace> places(static_cast<size_t>(world), PipelinePlace{-1, -1});
  if (!groups->is_array()) return corrupt("{}: 'groups.pp' is not an array", file);
  for (size_t g = 0; g < groups->size(); ++g) {
    const json& members = (*groups)[g];
    if (!members.is_array()) return corrupt("{}: 'groups.pp[{}]' is not an array", file, g);
    for (size_t i = 0; i < members.size(); ++i) {
      const json& r = members[i];
      if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() >= world)
        return corrupt("{}: 'groups.pp[{}][{}]' is not a world rank below {}", file, g, i, world);
      PipelinePlace& p = places[r.get<size_t>()];
      if (p.group >= 0) return corrupt("{}: world rank {} appears in two pipeline groups", file, r.get<int>());
      p = {static_cast<int>(g), static_cast<int>(i)};
    }
  }
  for (size_t r = 0; r < places.size(); ++r)
    if (places[r].group < 0) return corrupt("{}: world rank {} is in no pipeline group ('groups.pp')", file, r);
  return places;
}

Result<RunTimelines> read_run_timelines(const std::string& dir) {
  namespace fs = std::filesystem;
  const RunPaths paths(dir);
  SP_ASSIGN_OR_RETURN(json contract, read_json_file(paths.contract()));
  SP_ASSIGN_OR_RETURN(json topology, read_json_file(paths.topology()));
  auto shape = pipeline_shape_of(contract);
  if (!shape.ok()) return shape.status().with_context(dir);
  auto places = pipeline_places_of(topology);
  if (!places.ok()) return places.status().with_context(dir);
  const size_t world = places->size();
  if (static_cast<int64_t>(world) != static_cast<int64_t>(shape->dp) * shape->tp * shape->pp)
    return corrupt("{}: topology.json world size {} ≠ dp {} × tp {} × pp {} in contract.json", dir, world, shape->dp,
                   shape->tp, shape->pp);
  RunTimelines run{.shape = *shape, .places = std::move(*places), .timelines = {}, .splits = {}};
  std::vector<std::vector<TimelineInterval>>& timelines = run.timelines;
  timelines.resize(world);
  run.splits.resize(world);
  for (size_t r = 0; r < world; ++r) {
    const std::string path = paths.timeline(static_cast<int>(r));
    std::error_code ec;
    if (!fs::exists(path, ec))
      return not_found("timeline file '{}' is missing (world size {})", path, world)
          .with_hint("the run did not finish or was written by an older shardproof; re-run it");
    SP_ASSIGN_OR_RETURN(std::string text, read_file(path, uint64_t{1} << 32));
    SP_ASSIGN_OR_RETURN(timelines[r], parse_timeline(text, path, &run.splits[r]));
    if (timelines[r].empty()) return corrupt("timeline file '{}' holds no intervals", path);
  }
  return run;
}

}  // namespace sp::evidence
