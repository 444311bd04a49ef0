// The judge's criteria on the recording itself: its seal, its collectives against the model's traffic, its
// checksum records against its recorded values, its resumes against what it saved (judge/criteria_rows.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "judge/criteria_rows.h"
#include "plan/traffic_model.h"

namespace sp::judge::criterion {
namespace {
// The model's traffic per (group, phase) of one step, summed over the ranks (the trace report's unit), without
// the engine's own world-group evidence (its exact-sum loss, norm and checksum exchanges).
std::map<std::pair<std::string, std::string>, plan::Traffic> model_cells(const JudgeContext& x) {
  std::map<std::pair<std::string, std::string>, plan::Traffic> out;
  for (int rank = 0; rank < x.recording->contract().world; ++rank)
    for (const auto& [key, t] : plan::predict_step_traffic(*x.plan, x.recording->grid(), rank, false, false, x.layout))
      if (key.first != "world") {
        out[key].ops += t.ops;
        out[key].bytes += t.bytes;
      }
  return out;
}

bool compared_phase(comm::Phase p) {
  return p == comm::Phase::kForward || p == comm::Phase::kBackward || p == comm::Phase::kGradSync ||
         p == comm::Phase::kOptimizer;
}

}  // namespace

std::string ranks_text(const std::vector<int>& r) {
  std::string s;
  for (size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + std::to_string(r[i]);
  return s;
}
std::string pct(double x) { return fmt::format("{:.3g} %", 100 * x); }
proof::Criterion row(std::string name, std::string threshold, std::string evidence, bool passed) {
  proof::Criterion c;
  c.name = std::move(name);
  c.threshold = std::move(threshold);
  c.evidence = std::move(evidence);
  c.passed = passed;
  return c;
}
std::string rank_records(int rank) { return recording_rank_file(kRecordsDir, rank, "jsonl"); }

Row sealed(const JudgeContext& x) {
  const Recording& rec = *x.recording;
  const RecordingContract& c = rec.contract();
  Row r{row("recording complete and sealed",
            "every rank's seal matches its files; every step, micro-batch and tensor recorded",
            "seal/, contract.json, topology.json", true),
        {.view = "recording", .point = 0}};
  r.first.measured = fmt::format(
      "{} ranks ({} dp × {} tp × {} pp, {}), {} steps, {} micro-batches per step, {}, {} files sealed{}", c.world,
      c.strategy.dp, c.strategy.tp, c.strategy.pp, c.strategy_name, c.steps, c.micro_batches,
      c.every_step() ? fmt::format("format 2: gradients every step, the state at step{} {}",
                                   rec.state_steps().size() == 1 ? "" : "s", ranks_text([&] {
                                     std::vector<int> v;
                                     for (int64_t s : rec.state_steps()) v.push_back(static_cast<int>(s));
                                     return v;
                                   }()))
                     : fmt::format("format 1: {} anchors", c.anchors.size()),
      rec.files_sealed(),
      rec.consumed().empty() ? "" : fmt::format(" ({} judged as they came and discarded)", rec.consumed().size()));
  if (!rec.foreign_files().empty())
    r.first.measured += fmt::format("; {} other file{} of the directory (the user's, not read: {}{})",
                                    rec.foreign_files().size(), rec.foreign_files().size() == 1 ? "" : "s",
                                    rec.foreign_files().front(), rec.foreign_files().size() > 1 ? ", ..." : "");
  return r;
}

Row collectives(const JudgeContext& x) {
  Row r{row("collectives consistent across ranks", "every group's members issued the same ops", "trace/"),
        {.view = "collectives", .point = 1, .evidence = "trace/"}};
  if (!x.trace.ok()) {
    r.first.measured = "trace unreadable";
    r.first.detail = x.trace.status().message();
    r.second.found = true, r.second.step = 0, r.second.detail = r.first.detail;
    return r;
  }
  const evidence::TraceReport& t = *x.trace;
  r.first.passed = t.consistent();
  r.first.measured = fmt::format("{} records of {} ranks: {}", t.records, t.rank_files,
                                 t.consistent() ? "consistent" : fmt::format("{} mismatches", t.mismatches.size()));
  if (x.recording->contract().flight_recorder_trace)
    r.first.measured +=
        " (converted from Flight Recorder dumps: op, dtype, count and step compared; payload digests "
        "NOT compared, the dumps have none)";
  if (!t.consistent()) {
    const evidence::TraceMismatch& m = t.mismatches.front();
    r.first.detail = m.message;
    r.second = {.view = "collectives",
                .point = 1,
                .found = true,
                .step = std::max<int64_t>(m.step, 0),
                .phase = m.phase,
                .tensor = m.group,
                .ranks = m.ranks,
                .detail = m.message,
                .evidence = "trace/"};
  }
  return r;
}

Row traffic(const JudgeContext& x) {
  Row r{row("traffic equals the model of the recorded layout",
            "payload bytes per step × group × phase (forward, backward, grad_sync, optimizer) = "
            "plan/traffic_model of the declared grid and the recorded tp split; op counts may differ (bucketing)",
            "trace/, contract.json, records/"),
        {.view = "traffic", .point = 2, .evidence = "trace/"}};
  if (!x.plan.ok() || !x.trace.ok()) {
    r.first.measured = !x.plan.ok() ? "no model" : "trace unreadable";
    r.first.detail = !x.plan.ok() ? "the engine has no plan for the declared strategy: " + x.plan.status().message()
                                  : x.trace.status().message();
    r.second.found = true, r.second.step = 0, r.second.detail = r.first.detail;
    return r;
  }
  const RecordingContract& c = x.recording->contract();
  const comm::ProcessGrid& grid = x.recording->grid();
  // A Flight Recorder trace has no phases: its cells are (step, group), the model's phases summed; a statistics
  // collective cannot be told from the others there, so it counts as traffic (and fails a cell the model lacks).
  const bool fr = c.flight_recorder_trace;
  const std::string all_phases = "all phases";
  auto model = model_cells(x);
  if (fr) {
    std::map<std::pair<std::string, std::string>, plan::Traffic> folded;
    for (const auto& [key, t] : model) {
      folded[{key.first, all_phases}].ops += t.ops;
      folded[{key.first, all_phases}].bytes += t.bytes;
    }
    model = std::move(folded);
  }
  // A pure data-parallel run may reduce on the default (world) group: it is the one dp group.
  const std::string dp0 = grid.group_name(comm::Axis::kDp, 0);
  std::map<std::pair<int64_t, std::pair<std::string, std::string>>, int64_t> traced;
  int64_t stats_bytes = 0, traced_ops = 0, model_ops = 0;
  for (const auto& [k, t] : x.trace->traffic) {
    if (k.step < 0 || k.step >= c.steps) continue;
    if (k.phase == comm::Phase::kEvidence) stats_bytes += t.bytes;
    // Flight Recorder: every op but the set-up ones it recognizes (DDP's bucket rebuild) is phase unknown.
    if (!(fr ? k.phase == comm::Phase::kUnknown : compared_phase(k.phase))) continue;
    std::string g = k.group == "world" && c.strategy.tp == 1 && c.strategy.pp == 1 ? dp0 : k.group;
    traced[{k.step, {g, fr ? all_phases : std::string(comm::phase_name(k.phase))}}] += t.bytes;
    traced_ops += t.ops;
  }
  for (const auto& [key, t] : model) model_ops += t.ops * c.steps;
  // A layout the model cannot model: the tp groups' forward and backward cells are not compared (nor passed).
  // FSDP2's units the model cannot model: every dp group's cells.
  const auto unmodelled = [&](const std::pair<std::string, std::string>& key) {
    if (!x.unmodelled_dp.empty() && key.first.rfind("dp[", 0) == 0 &&
        (x.unmodelled_dp_phases.empty() || x.unmodelled_dp_phases.count(key.second)))
      return true;
    return !x.unmodelled.empty() && key.first.rfind("tp[", 0) == 0 &&
           (key.second == "forward" || key.second == "backward");
  };
  int64_t cells = 0, skipped = 0, failing = 0;
  for (int64_t s = 0; s < c.steps; ++s) {
    std::set<std::pair<std::string, std::string>> keys;
    for (const auto& [k, b] : model) keys.insert(k);
    for (auto it = traced.lower_bound({s, {}}); it != traced.end() && it->first.first == s; ++it)
      keys.insert(it->first.second);
    bool step_fails = false;
    for (const auto& key : keys) {
      if (unmodelled(key)) {
        ++skipped;
        continue;
      }
      ++cells;
      const int64_t want = model.count(key) ? model.at(key).bytes : 0;
      const int64_t got = traced.count({s, key}) ? traced.at({s, key}) : 0;
      if (got == want) continue;
      step_fails = true;
      if (r.second.found) continue;
      std::vector<int> members;
      for (int rank = 0; rank < c.world; ++rank)
        for (comm::Axis a : {comm::Axis::kDp, comm::Axis::kTp, comm::Axis::kPp})
          if (grid.group_name(a, rank) == key.first) members.push_back(rank);
      r.second = {.view = "traffic",
                  .point = 2,
                  .found = true,
                  .step = s,
                  .phase = key.second,
                  .tensor = key.first,
                  .ranks = members,
                  .detail = fmt::format("step {} {} on {}: {} bytes traced, the model of {} predicts {}", s, key.second,
                                        key.first, got, c.strategy_name, want),
                  .evidence = "trace/",
                  .ratio = std::numeric_limits<double>::infinity(),
                  .pattern = got == 0 ? "nothing traced where the model has traffic: that synchronization never ran"
                             : got < want
                                 ? fmt::format("{} bytes fewer than the model: a message (a gradient bucket, a "
                                               "tensor) of that size was not sent",
                                               want - got)
                                 : fmt::format("{} bytes more than the model: an extra collective, or a larger "
                                               "message than the layout needs",
                                               got - want)};
      r.first.detail = r.second.detail;
    }
    failing += step_fails ? 1 : 0;
  }
  if (r.second.found) r.second.steps_failing = failing;
  r.first.passed = !r.second.found;
  // Nothing compared (every cell unmodelled) is said as such, never as cells that are equal.
  r.first.measured = fmt::format(
      "{}{}{}{}; ops {} traced, {} in the model; statistics (phase evidence, not compared) {} bytes{}",
      cells == 0 && skipped > 0
          ? fmt::format("no cell compared in {} steps", c.steps)
          : fmt::format("{} cells of {} steps {}", cells, c.steps, r.first.passed ? "equal" : "differ"),
      x.layout.units.empty()
          ? ""
          : fmt::format(" (dp: FSDP2's schedule of {} fully_shard units, {} resharded after forward)",
                        x.layout.units.size(),
                        std::count_if(x.layout.units.begin(), x.layout.units.end(),
                                      [](const plan::ShardedUnit& u) { return u.reshard_after_forward; })),
      x.layout.flat_zero.numel.empty() ? ""
      : c.strategy.zero == 3
          ? fmt::format(" (dp: DeepSpeed's ZeRO-3: {} gradient reduce-scatter{} a step of its parameters' partitions)",
                        x.layout.flat_zero.reductions, x.layout.flat_zero.reductions == 1 ? "" : "s")
          : fmt::format(" (dp: DeepSpeed's ZeRO-{}: {} flat parameter group{}, {} gradient reduction{} a step)",
                        c.strategy.zero, x.layout.flat_zero.numel.size(),
                        x.layout.flat_zero.numel.size() == 1 ? "" : "s", x.layout.flat_zero.reductions,
                        x.layout.flat_zero.reductions == 1 ? "" : "s"),
      c.strategy.tp > 1
          ? fmt::format(" (embedding {}, head {})", x.layout.embedding_split ? "vocabulary-parallel" : "whole",
                        x.layout.head_split ? "vocabulary-parallel" : "whole")
          : "",
      traced_ops, model_ops, stats_bytes,
      skipped > 0 ? fmt::format("; {} cells NOT compared (UNVERIFIED): {}", skipped, x.traffic_unmodelled()) : "");
  if (fr) {
    r.first.threshold =
        "payload bytes per step × group, all phases together (a Flight Recorder trace has no phase) = "
        "plan/traffic_model of the declared grid and the recorded tp split; op counts may differ (bucketing)";
    r.first.measured +=
        "; per step and group, all phases together: the phases (forward, backward, grad_sync, optimizer, "
        "statistics), micro-batches and payload digests NOT compared: the trace is a Flight Recorder dump, which "
        "records none of them";
  }
  return r;
}

Row records_agree(const JudgeContext& x) {
  const bool v2 = x.recording->contract().every_step();
  Row r{row("records agree across views",
            v2 ? "at every step: the engine's summary of the recorded gradients = the assembled checksum records, bit "
                 "for bit"
               : "at every anchor with checksums: the engine's summary of the anchor's gradients and parameters "
                 "= the assembled checksum records, bit for bit",
            v2 ? "grads/, records/" : "anchors/, records/"),
        {.view = "records", .point = 0}};
  int64_t n = 0;
  std::vector<std::string> bad;
  for (const StepResult& a : x.steps) {
    if (!a.checked || !x.recording->contract().checksums_at(a.step)) continue;
    n += (v2 ? 1 : 2) * static_cast<int64_t>(a.grads.size());
    bad.insert(bad.end(), a.disagreements.begin(), a.disagreements.end());
  }
  r.first.passed = bad.empty();
  r.first.measured = fmt::format("{} recorded tensors against their checksum records: {}", n,
                                 bad.empty() ? "equal" : fmt::format("{} differ", bad.size()));
  if (!bad.empty()) r.first.detail = bad.front();
  return r;
}

Row resume(const JudgeContext& x) {
  Row r{row("resume continues from exactly the saved state",
            "every rank's loaded parameters and AdamW moments = what it saved (format 2: = the state the run had)",
            "records/, state/"),
        {.view = "resume", .point = 10, .evidence = "records/"}};
  int64_t resumes = 0, states = 0;
  for (int rank = 0; rank < x.recording->contract().world && !r.second.found; ++rank) {
    const RankRecords& rr = x.recording->ranks()[static_cast<size_t>(rank)];
    for (const StateRecord& res : rr.resumes) {
      ++resumes;
      const StateRecord* save = nullptr;
      for (const StateRecord& s : rr.saves)
        if (s.step == res.step) save = &s;
      const auto found = [&](std::string tensor, std::string what, std::string pattern) {
        r.second = {.view = "resume",
                    .point = 10,
                    .found = true,
                    .step = res.step,
                    .phase = "resume",
                    .tensor = tensor,
                    .ranks = {rank},
                    .detail = what,
                    .evidence = rank_records(rank),
                    .ratio = std::numeric_limits<double>::infinity(),
                    .steps_failing = 1,
                    .pattern = pattern};
      };
      if (save == nullptr) {
        found("", fmt::format("rank {} resumed at step {} from a state it never recorded saving", rank, res.step),
              "a resume from another checkpoint than the one saved");
        break;
      }
      for (const StateDigest& want : save->states) {
        ++states;
        const StateDigest* got = nullptr;
        for (const StateDigest& g : res.states)
          if (g.tensor == want.tensor && g.state == want.state && g.shard == want.shard) got = &g;
        if (got == nullptr || got->sha256 != want.sha256 || got->optimizer_step != want.optimizer_step) {
          const bool absent = got == nullptr || !got->sha256;
          found(want.tensor,
                fmt::format("step {}: rank {} resumed {} of {} {} what it saved ({})", res.step, rank, want.state,
                            want.tensor, absent ? "without" : "different from",
                            absent ? "the state is absent after loading"
                                   : fmt::format("step count {} vs {}", got->optimizer_step, want.optimizer_step)),
                absent ? "the optimizer state was not restored (moments absent after loading)"
                       : "the loaded state is not the saved one (another checkpoint, or a partial load)");
          break;
        }
      }
      if (r.second.found) break;
    }
  }
  // Format 2: the state recorded at a resume against the replay's state at that step.
  for (const StepResult& s : x.steps)
    if (!s.resume_mismatch.empty() && (!r.second.found || s.step < r.second.step)) {
      r.second = {.view = "resume",
                  .point = 10,
                  .found = true,
                  .step = s.step,
                  .phase = "resume",
                  .tensor = s.resume_mismatch.front(),
                  .ranks = {0},
                  .detail = fmt::format("step {}: the state the run resumed from differs from the state it had ({} "
                                        "of {} tensors' parameters, moments or step counts differ, first: {})",
                                        s.step, s.resume_mismatch.size(), 3 * x.recording->weights().size(),
                                        s.resume_mismatch.front()),
                  .evidence = recording_step_file(kStateDir, s.step, 0),
                  .ratio = std::numeric_limits<double>::infinity(),
                  .steps_failing = 1,
                  .pattern = "the run resumed from a state it did not have (an older checkpoint, or one not restored)"};
      ++resumes;
    }
  r.first.required = resumes > 0;
  r.first.passed = !r.second.found;
  r.first.measured = resumes == 0 ? "no resume recorded: not exercised"
                                  : fmt::format("{} rank resumes, {} saved states compared", resumes, states);
  r.first.detail = r.second.detail;
  return r;
}

}  // namespace sp::judge::criterion
