// Pipeline bubble from timelines (bubble.h). The computation is a fold over intervals keyed by
// (rank, step); the stage aggregation is a mean over ranks then a median over steps.
#include "evidence/bubble.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "comm/topology.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"

namespace sp::evidence {
namespace {

using nlohmann::json;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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

}  // namespace

Result<std::vector<TimelineInterval>> parse_timeline(std::string_view text, const std::string& path) {
  std::vector<TimelineInterval> out;
  SP_ASSIGN_OR_RETURN(const JsonlDocument doc, parse_jsonl(text, path));
  for (size_t i = 0; i < doc.records.size(); ++i) {
    const json& j = doc.records[i];
    const std::string where = fmt::format("{}:{}", path, doc.line_numbers[i]);
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

double bubble_theory(const PipelineShape& s) {
  if (s.pp <= 1) return 0;
  const double p = s.pp, m = static_cast<double>(s.micro_batches);
  const double v = s.schedule == "interleaved" ? s.virtual_stages : 1;
  return (p - 1) / (v * m + p - 1);
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

BubbleReport bubble_of_timelines(const std::vector<std::vector<TimelineInterval>>& timelines,
                                 const std::vector<PipelinePlace>& places, const PipelineShape& shape) {
  BubbleReport rep;
  rep.shape = shape;
  rep.theory = bubble_theory(shape);
  const size_t world = std::min(timelines.size(), places.size());

  // Per (rank, step): the end of the last interval, compute and comm sums.
  struct Acc {
    int64_t end = 0, compute = 0, comm = 0;
  };
  std::map<int64_t, std::vector<Acc>> by_step;  // step -> per rank
  for (size_t r = 0; r < world; ++r)
    for (const TimelineInterval& iv : timelines[r]) {
      std::vector<Acc>& accs = by_step[iv.step];
      if (accs.empty()) accs.resize(world);
      Acc& a = accs[r];
      a.end = std::max(a.end, iv.t1_us);
      const int64_t len = iv.t1_us - iv.t0_us;
      if (iv.kind == "forward" || iv.kind == "backward")
        a.compute += len;
      else if (iv.kind == "send" || iv.kind == "recv" || iv.kind == "wait")
        a.comm += len;
    }
  for (const auto& [step, accs] : by_step)
    if (step >= 1 || by_step.size() == 1) rep.steps_used.push_back(step);
  if (rep.steps_used.empty() && !by_step.empty()) {
    rep.steps_used.push_back(by_step.begin()->first);  // only steps ≤ 0 recorded
  }
  if (by_step.size() == 1)
    rep.warnings.push_back("only one step recorded: it includes warm-up (allocation, first touch)");
  if (by_step.empty()) rep.warnings.push_back("the timeline holds no intervals");

  int groups = 0;
  for (size_t r = 0; r < world; ++r) groups = std::max(groups, places[r].group + 1);
  const int stages = std::max(1, shape.pp);
  // stage -> per used step: mean over its ranks.
  struct StageStep {
    double span = 0, compute = 0, comm = 0, bubble = 0;
  };
  std::vector<std::vector<StageStep>> stage_steps(static_cast<size_t>(stages));
  std::vector<int> stage_ranks(static_cast<size_t>(stages), 0);
  for (size_t r = 0; r < world; ++r)
    if (places[r].stage >= 0 && places[r].stage < stages) ++stage_ranks[static_cast<size_t>(places[r].stage)];
  std::vector<std::vector<double>> model_bubbles(static_cast<size_t>(stages));

  for (int64_t step : rep.steps_used) {
    const std::vector<Acc>& accs = by_step.at(step);
    std::vector<int64_t> span(static_cast<size_t>(groups), 0);
    for (size_t r = 0; r < world; ++r) {
      int64_t& s = span[static_cast<size_t>(places[r].group)];
      s = std::max(s, accs[r].end);
    }
    std::vector<StageStep> sum(static_cast<size_t>(stages));
    for (size_t r = 0; r < world; ++r) {
      const int st = places[r].stage;
      if (st < 0 || st >= stages) continue;
      RankStepTime t;
      t.world_rank = static_cast<int>(r);
      t.stage = st;
      t.step = step;
      t.span_us = span[static_cast<size_t>(places[r].group)];
      t.compute_us = accs[r].compute;
      t.comm_us = accs[r].comm;
      t.bubble = t.span_us > 0 ? 1.0 - static_cast<double>(t.compute_us) / static_cast<double>(t.span_us) : 0.0;
      rep.rank_steps.push_back(t);
      StageStep& ss = sum[static_cast<size_t>(st)];
      ss.span += static_cast<double>(t.span_us);
      ss.compute += static_cast<double>(t.compute_us);
      ss.comm += static_cast<double>(t.comm_us);
      ss.bubble += t.bubble;
    }
    std::vector<double> cost(static_cast<size_t>(stages), 0);  // mean compute per stage this step
    for (int st = 0; st < stages; ++st) {
      const int n = stage_ranks[static_cast<size_t>(st)];
      if (n == 0) continue;
      StageStep ss = sum[static_cast<size_t>(st)];
      ss.span /= n;
      ss.compute /= n;
      ss.comm /= n;
      ss.bubble /= n;
      stage_steps[static_cast<size_t>(st)].push_back(ss);
      cost[static_cast<size_t>(st)] = ss.compute;
    }
    // Stage-cost model: c_i = cost_i / m; span = Σ c_i + (m−1)·max c_i; bubble_i = 1 − m·c_i / span.
    if (shape.schedule != "interleaved" || shape.virtual_stages == 1) {
      const double m = static_cast<double>(std::max<int64_t>(1, shape.micro_batches));
      double total = 0, peak = 0;
      for (double c : cost) {
        total += c / m;
        peak = std::max(peak, c / m);
      }
      const double model_span = total + (m - 1) * peak;
      for (int st = 0; st < stages; ++st)
        if (model_span > 0)
          model_bubbles[static_cast<size_t>(st)].push_back(1.0 - cost[static_cast<size_t>(st)] / model_span);
    }
  }

  double sum_bubble = 0, sum_compute = 0, sum_comm = 0, sum_span = 0;
  int counted = 0;
  rep.measured_min = 1;
  rep.measured_max = 0;
  for (int st = 0; st < stages; ++st) {
    const std::vector<StageStep>& v = stage_steps[static_cast<size_t>(st)];
    StageBubble sb;
    sb.stage = st;
    sb.ranks = stage_ranks[static_cast<size_t>(st)];
    if (v.empty()) {
      rep.warnings.push_back(fmt::format("stage {} has no ranks or no intervals", st));
      rep.stages.push_back(sb);
      continue;
    }
    std::vector<double> spans, computes, comms, bubbles;
    for (const StageStep& s : v) {
      spans.push_back(s.span / 1000.0);
      computes.push_back(s.compute / 1000.0);
      comms.push_back(s.comm / 1000.0);
      bubbles.push_back(s.bubble);
    }
    sb.span_ms = median(spans);
    sb.compute_ms = median(computes);
    sb.comm_ms = median(comms);
    sb.bubble = median(bubbles);
    sb.bubble_min = *std::min_element(bubbles.begin(), bubbles.end());
    sb.bubble_max = *std::max_element(bubbles.begin(), bubbles.end());
    const std::vector<double>& mb = model_bubbles[static_cast<size_t>(st)];
    sb.model_bubble = mb.empty() ? -1.0 : median(mb);
    rep.stages.push_back(sb);
    sum_bubble += sb.bubble;
    if (sb.span_ms > 0) {
      sum_compute += sb.compute_ms / sb.span_ms;
      sum_comm += sb.comm_ms / sb.span_ms;
    }
    sum_span += sb.span_ms;
    rep.measured_min = std::min(rep.measured_min, sb.bubble);
    rep.measured_max = std::max(rep.measured_max, sb.bubble);
    ++counted;
  }
  if (counted > 0) {
    rep.measured = sum_bubble / counted;
    rep.compute_fraction = sum_compute / counted;
    rep.comm_fraction = sum_comm / counted;
    rep.span_ms = sum_span / counted;
  } else {
    rep.measured_min = rep.measured_max = 0;
  }
  return rep;
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
  RunTimelines run{.shape = *shape, .places = std::move(*places), .timelines = {}};
  std::vector<std::vector<TimelineInterval>>& timelines = run.timelines;
  timelines.resize(world);
  for (size_t r = 0; r < world; ++r) {
    const std::string path = paths.timeline(static_cast<int>(r));
    std::error_code ec;
    if (!fs::exists(path, ec))
      return not_found("timeline file '{}' is missing (world size {})", path, world)
          .with_hint("the run did not finish or was written by an older shardproof; re-run it");
    SP_ASSIGN_OR_RETURN(std::string text, read_file(path, uint64_t{1} << 32));
    SP_ASSIGN_OR_RETURN(timelines[r], parse_timeline(text, path));
    if (timelines[r].empty()) return corrupt("timeline file '{}' holds no intervals", path);
  }
  return run;
}

Result<BubbleReport> bubble_of_run(const std::string& dir) {
  SP_ASSIGN_OR_RETURN(const RunTimelines run, read_run_timelines(dir));
  return bubble_of_timelines(run.timelines, run.places, run.shape);
}

json BubbleReport::to_json() const {
  json stages_j = json::array();
  for (const StageBubble& s : stages)
    stages_j.push_back({{"stage", s.stage},
                        {"ranks", s.ranks},
                        {"span_ms", s.span_ms},
                        {"compute_ms", s.compute_ms},
                        {"comm_ms", s.comm_ms},
                        {"bubble", s.bubble},
                        {"bubble_min", s.bubble_min},
                        {"bubble_max", s.bubble_max},
                        {"model_bubble", s.model_bubble < 0 ? json(nullptr) : json(s.model_bubble)}});
  json ranks_j = json::array();
  for (const RankStepTime& t : rank_steps)
    ranks_j.push_back({{"rank", t.world_rank},
                       {"stage", t.stage},
                       {"step", t.step},
                       {"span_us", t.span_us},
                       {"compute_us", t.compute_us},
                       {"comm_us", t.comm_us},
                       {"bubble", t.bubble}});
  return {{"dp", shape.dp},
          {"tp", shape.tp},
          {"pp", shape.pp},
          {"schedule", shape.schedule},
          {"virtual_stages", shape.virtual_stages},
          {"micro_batches", shape.micro_batches},
          {"theory", theory},
          {"measured", measured},
          {"measured_min", measured_min},
          {"measured_max", measured_max},
          {"compute_fraction", compute_fraction},
          {"comm_fraction", comm_fraction},
          {"span_ms", span_ms},
          {"steps_used", steps_used},
          {"stages", stages_j},
          {"rank_steps", ranks_j},
          {"warnings", warnings}};
}

std::string BubbleReport::to_markdown() const {
  std::string out = fmt::format(
      "pipeline: pp {} × dp {} × tp {}, schedule {}{}, m = {} micro-batches per dp rank; "
      "steps used: {}\n\n",
      shape.pp, shape.dp, shape.tp, shape.schedule,
      shape.schedule == "interleaved" ? fmt::format(" (v = {})", shape.virtual_stages) : "", shape.micro_batches,
      steps_used.size());
  out += "| stage | ranks | span ms | compute ms | p2p ms | bubble measured (min–max) | stage-cost model | theory |\n";
  out += "|---:|---:|---:|---:|---:|---|---:|---:|\n";
  for (const StageBubble& s : stages)
    out += fmt::format("| {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.3f} ({:.3f}–{:.3f}) | {} | {:.3f} |\n", s.stage,
                       s.ranks, s.span_ms, s.compute_ms, s.comm_ms, s.bubble, s.bubble_min, s.bubble_max,
                       s.model_bubble < 0 ? std::string("–") : fmt::format("{:.3f}", s.model_bubble), theory);
  out += fmt::format("\nmean over stages: measured {:.3f}, theory {:.3f} (difference {:+.3f})\n", measured, theory,
                     measured - theory);
  for (const std::string& w : warnings) out += "warning: " + w + "\n";
  return out;
}

}  // namespace sp::evidence
