// Cross-checks that make a consistent forgery expensive (criteria_rows.h): what one view records must follow
// from another view or from the contract — the gradient norm from the gradient checksums, the clipping and the
// skips from the norm, the learning rate from the schedule, each view's steps from train.steps, a resumed
// stage's trace from a resume of its own. A forger who recomputes every one of them and reseals is stopped only
// by a signature (verify --key, docs/prove.md §verify). Each problem names the stage, the file, the step and
// (traces) the rank.
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "comm/trace_record.h"
#include "core/file_io.h"
#include "evidence/checksums.h"
#include "kernels/clip.h"
#include "optim/loss_scaler.h"
#include "proof/criteria_rows.h"

namespace sp::proof::criterion {

using nlohmann::json;
using namespace evidence;  // file names (bundle_paths.h)

namespace {

// The stages a bundle holds, in the order the protocol ran them.
std::vector<std::string_view> stages_of(const GateContext& c) {
  std::vector<std::string_view> out = {kReferenceStage, kParallelStage};
  if (!c.bundle->anchors().empty()) out.push_back(kAnchoredStage);
  out.push_back(kFaultStage);
  if (!c.bundle->fault_anchors().empty()) out.push_back(kFaultAnchoredStage);
  out.push_back(kRecoveryStage);
  return out;
}

// "steps 0–5", "steps 3, 4", "no step".
std::string steps_text(const std::set<int64_t>& s) {
  if (s.empty()) return "no step";
  const bool run = *s.rbegin() - *s.begin() + 1 == static_cast<int64_t>(s.size());
  return run && s.size() > 2 ? fmt::format("steps {}–{}", *s.begin(), *s.rbegin())
                             : fmt::format("step{} {}", s.size() > 1 ? "s" : "", fmt::join(s, ", "));
}

// The steps a stage must hold, from the contract: every step (the recovery too: its metrics and checksums
// continue the parallel run's prefix), the anchors of a replay; a fault run and its replay may stop early (a
// prefix).
struct StepRule {
  std::set<int64_t> steps;
  bool prefix_allowed = false;
};
StepRule step_rule(const GateContext& c, std::string_view stage) {
  StepRule r;
  if (stage == kAnchoredStage) return {{c.bundle->anchors().begin(), c.bundle->anchors().end()}};
  if (stage == kFaultAnchoredStage)  // stops with the fault, like the fault run
    return {{c.bundle->fault_anchors().begin(), c.bundle->fault_anchors().end()}, true};
  for (int64_t s = 0; s < c.config.train.steps; ++s) r.steps.insert(s);
  r.prefix_allowed = stage == kFaultStage;
  return r;
}

// "" when `got` is what the rule allows, else the first difference.
std::string step_problem(const std::set<int64_t>& got, const StepRule& rule, const std::string& where,
                         int64_t duplicated) {
  if (duplicated >= 0) return fmt::format("{}: step {} appears twice", where, duplicated);
  std::set<int64_t> want = rule.steps;
  if (rule.prefix_allowed && !got.empty() && got.size() <= want.size())
    want = std::set<int64_t>(rule.steps.begin(), std::next(rule.steps.begin(), static_cast<int64_t>(got.size())));
  if (got == want) return "";
  for (int64_t s : want)
    if (!got.count(s))
      return fmt::format("{}: step {} is missing (the contract implies {})", where, s, steps_text(want));
  for (int64_t s : got)
    if (!want.count(s))
      return fmt::format("{}: step {} is not one the contract implies ({})", where, s, steps_text(want));
  return "";
}

// Every rank's trace records of a stage (a missing or unreadable file: an error naming it).
Result<std::vector<std::vector<comm::TraceRecord>>> rank_traces(const RunPaths& run, std::string_view stage,
                                                                int world) {
  std::vector<std::vector<comm::TraceRecord>> out;
  for (int r = 0; r < world; ++r) {
    const std::string path = comm::trace_file_path(run.root(), r);
    const std::string label = stage_file(stage, fmt::format("{}/{}", kTraceDir, comm::trace_file_name(r)));
    auto text = read_file(path, uint64_t{1} << 30);
    if (!text.ok()) return not_found("{}: {}", label, text.status().message());
    auto parsed = parse_rank_trace(*text, r, label);
    if (!parsed.ok()) return parsed.status();
    out.push_back(std::move(parsed->records));
  }
  return out;
}

bool training_phase(comm::Phase p) { return p != comm::Phase::kSetup && p != comm::Phase::kCheckpoint; }

}  // namespace

// 1c. The gradient norm in metrics.jsonl is √Σ of the step's gradient records' l2² in checksums.jsonl (÷ the loss
//     scale in fp16), at every step with gradient records, in every stage: within the rounding of that sum of n
//     squares in doubles, (n + 8)·2^-53 relative (each l2 is a correctly rounded square root of an exact sum).
Criterion grad_norms_agree(const GateContext& c) {
  std::vector<std::string> problems;
  int64_t checked = 0;
  for (std::string_view stage : stages_of(c)) {
    const RunPaths run = c.bundle->paths().stage(stage);
    if (!path_exists(run.checksums())) continue;  // a stage that did not run: stages completed says so
    auto records = read_checksums(run.checksums());
    if (!records.ok()) {
      problems.push_back(records.status().message());
      continue;
    }
    struct Step {
      double squares = 0, scale = 1;
      int64_t tensors = 0;
      bool finite = true;
    };
    std::map<int64_t, Step> steps;
    for (const ChecksumRecord& r : *records) {
      if (r.key.phase == kScalerPhase) steps[r.key.step].scale = r.scale;
      if (r.key.phase != "grad") continue;
      Step& s = steps[r.key.step];
      s.squares += r.l2 * r.l2;
      s.finite = s.finite && r.finite;
      ++s.tensors;
    }
    for (const json& m : metrics_records(run)) {
      const int64_t step = m.value("step", int64_t{-1});
      const auto it = steps.find(step);
      if (it == steps.end() || it->second.tensors == 0 || !it->second.finite || !m.contains("grad_norm")) continue;
      ++checked;
      const double want = std::sqrt(it->second.squares) / it->second.scale;
      const double got = m["grad_norm"].is_number() ? m["grad_norm"].get<double>() : NAN;
      const double tol = static_cast<double>(it->second.tensors + 8) * 0x1p-53;
      if (!(std::fabs(got - want) <= tol * want))
        problems.push_back(
            fmt::format("{}: step {}: grad_norm {:.17g}, but √Σ l2² of the step's {} gradient records "
                        "in {} is {:.17g} (relative difference {:.2g} > {:.2g})",
                        stage_file(stage, kMetricsFile), step, got, it->second.tensors,
                        stage_file(stage, kChecksumsFile), want, std::fabs(got - want) / want, tol));
    }
  }
  return make("gradient norms agree across views", problems.empty(),
              fmt::format("{} steps compared, {} differ", checked, problems.size()),
              "metrics.jsonl's grad_norm = √Σ l2² of checksums.jsonl's gradients at every step that has them",
              fmt::format("*/{}, */{}", kMetricsFile, kChecksumsFile), problems.empty() ? "" : problems.front());
}

// 1c'. What the optimizer did follows from the gradient it saw, at every step of every stage: the clipping
//      coefficient is min(1, max_norm / (grad_norm + 1e-6)) of the recorded norm and the contract's
//      train.grad_clip, bit for bit (the engine's own function, kernels::clip_coefficient); a step is skipped
//      exactly when its gradient was not finite (metrics' finite = every gradient record's finite); a skipped
//      step leaves every parameter record as the step before left it; in fp16 the loss scale of each step is
//      the contract's dynamic scaler (optim::LossScaler) run over the recorded overflows from step 0.
namespace {

// One stage's problems (at most one per step and rule kind; the caller keeps the first).
void optimizer_problems(const GateContext& c, std::string_view stage, std::vector<std::string>& problems,
                        int64_t& checked) {
  const RunPaths run = c.bundle->paths().stage(stage);
  if (!path_exists(run.metrics())) return;  // a stage that did not run: stages completed says so
  const std::string file = stage_file(stage, kMetricsFile), sums = stage_file(stage, kChecksumsFile);
  std::map<int64_t, bool> grads_finite;                          // step → every gradient record finite
  std::map<int64_t, std::map<std::string, std::string>> params;  // step → tensor → digest
  if (auto records = read_checksums(run.checksums()); records.ok())
    for (const ChecksumRecord& r : *records) {
      if (r.key.phase == "grad") grads_finite.try_emplace(r.key.step, true).first->second &= r.finite;
      if (r.key.phase == "param") params[r.key.step][r.key.tensor] = r.digest;
    }
  // A replay stage starts each anchor from the reference's state, so the step before an anchor and the scaler's
  // history are not its own: the parameters and the fp16 scaler (replayed over the recorded overflows) are
  // checked on the stages that run from step 0 (the recovery continues the parallel run's records).
  const bool from_start = stage != kAnchoredStage && stage != kFaultAnchoredStage;
  std::optional<optim::LossScaler> scaler;
  if (c.config.fp16 && from_start) scaler.emplace(*c.config.fp16);
  int64_t expect_step = 0;
  for (const json& m : metrics_records(run)) {
    const int64_t step = m.value("step", int64_t{-1});
    if (step < 0 || !m.contains("loss")) continue;
    ++checked;
    const bool skipped = m.value("skipped", false), finite = m.value("finite", true);
    const double norm = m.contains("grad_norm") && m["grad_norm"].is_number() ? m["grad_norm"].get<double>() : NAN;
    if (std::isfinite(norm) && (!m.contains("clip") || !m["clip"].is_number() ||
                                m["clip"].get<double>() != kernels::clip_coefficient(norm, c.config.train.grad_clip)))
      problems.push_back(
          fmt::format("{}: step {}: clip {}, but min(1, max_norm / (grad_norm + 1e-6)) of grad_norm {:.17g} and "
                      "train.grad_clip {} is {:.9g}",
                      file, step, m.value("clip", json()).dump(), norm, c.config.train.grad_clip,
                      kernels::clip_coefficient(norm, c.config.train.grad_clip)));
    if (skipped == finite)
      problems.push_back(
          fmt::format("{}: step {}: skipped {} with finite {}: a step is skipped exactly when its "
                      "gradient is not finite",
                      file, step, skipped, finite));
    if (const auto g = grads_finite.find(step); g != grads_finite.end() && g->second != finite)
      problems.push_back(
          fmt::format("{}: step {}: finite {}, but {}'s gradient records say {}", file, step, finite, sums, g->second));
    const auto now = params.find(step), before = params.find(step - 1);
    if (from_start && skipped && now != params.end() && before != params.end() && now->second != before->second)
      problems.push_back(fmt::format("{}: step {} was skipped, but its parameter records differ from step {}'s", sums,
                                     step, step - 1));
    if (scaler) {
      const double want = scaler->scale();
      if (step != expect_step || m.value("loss_scale", 0.0) != want)
        problems.push_back(
            fmt::format("{}: step {}: loss_scale {}, the contract's [fp16] scaler over the recorded "
                        "overflows gives {} at step {}",
                        file, step, m.value("loss_scale", json()).dump(), want, expect_step));
      if (!scaler->update(!finite).ok() || step != expect_step) scaler.reset();  // the sequence is broken already
      ++expect_step;
    }
  }
}

}  // namespace

Criterion optimizer_follows_gradient(const GateContext& c) {
  std::vector<std::string> problems;
  int64_t checked = 0;
  for (std::string_view stage : stages_of(c)) optimizer_problems(c, stage, problems, checked);
  return make("clipping and skips follow the gradient", problems.empty() && checked > 0,
              fmt::format("{} steps compared, {} problems", checked, problems.size()),
              "clip = min(1, train.grad_clip / (grad_norm + 1e-6)) bit for bit; skipped ⇔ a non-finite gradient, "
              "and a skipped step leaves the parameters; fp16: the loss scales are the [fp16] scaler's",
              fmt::format("*/{}, */{}, {}", kMetricsFile, kChecksumsFile, kContractFile),
              problems.empty() ? (checked > 0 ? "" : "no step recorded") : problems.front());
}

// 1d. The learning rate of every step in metrics.jsonl is the contract's schedule at that step, bit for bit
//     (config.train: lr, min_lr, warmup, lr_schedule; the engine's own function, optim::LrSchedule::at).
Criterion lr_follows_schedule(const GateContext& c) {
  const optim::LrSchedule schedule = c.config.train.schedule();
  std::vector<std::string> problems;
  int64_t checked = 0;
  for (std::string_view stage : stages_of(c))
    for (const json& m : metrics_records(c.bundle->paths().stage(stage))) {
      const int64_t step = m.value("step", int64_t{-1});
      if (step < 0 || !m.contains("loss")) continue;
      ++checked;
      const double want = schedule.at(step);
      if (!m.contains("lr") || !m["lr"].is_number() || m["lr"].get<double>() != want)
        problems.push_back(fmt::format("{}: step {}: lr {}, the contract's schedule gives {:.17g}",
                                       stage_file(stage, kMetricsFile), step, m.value("lr", json()).dump(), want));
    }
  return make("learning rates follow the contract's schedule", problems.empty() && checked > 0,
              fmt::format("{} steps compared, {} differ", checked, problems.size()),
              fmt::format("lr = the {} schedule of config.train at every step, bit for bit",
                          optim::lr_schedule_name(schedule.kind)),
              fmt::format("*/{}, {}", kMetricsFile, kContractFile),
              problems.empty() ? "no step recorded a learning rate" : problems.front());
}

// 1e. Every view of every stage holds the steps the contract implies: metrics.jsonl and checksums.jsonl each
//     step once, every rank's trace and timeline every step from where the stage started to train.steps − 1.
Criterion steps_as_contracted(const GateContext& c) {
  std::vector<std::string> problems;
  int64_t views = 0;
  const int world = c.bundle->world_size();
  for (std::string_view stage : stages_of(c)) {
    const RunPaths run = c.bundle->paths().stage(stage);
    if (!path_exists(run.metrics())) continue;  // a stage that did not run: stages completed says so
    const StepRule rule = step_rule(c, stage);
    auto note = [&](const std::string& p) {
      ++views;
      if (!p.empty()) problems.push_back(p);
    };
    std::set<int64_t> got;
    int64_t twice = -1;
    for (const json& m : metrics_records(run))
      if (m.contains("loss") && !got.insert(m.value("step", int64_t{-1})).second) twice = m.value("step", int64_t{-1});
    note(step_problem(got, rule, stage_file(stage, kMetricsFile), twice));
    got.clear();
    twice = -1;
    if (auto records = read_checksums(run.checksums()); records.ok()) {
      for (const ChecksumRecord& r : *records)
        if (r.key.phase == "loss" && !got.insert(r.key.step).second) twice = r.key.step;
      note(step_problem(got, rule, stage_file(stage, kChecksumsFile), twice));
    } else {
      note(records.status().message());
    }
    if (stage == kAnchoredStage || stage == kFaultAnchoredStage) continue;  // replays: no trace of every step
    // A resumed stage's own trace and timeline start at its checkpoint; the others at step 0.
    StepRule own = rule;
    if (stage == kRecoveryStage) own.steps.erase(own.steps.begin(), own.steps.lower_bound(c.bundle->checkpoint_step()));
    const int ranks = stage == kReferenceStage ? 1 : world;  // the single-device reference
    auto traces = rank_traces(run, stage, ranks);
    if (!traces.ok()) {
      note(traces.status().message());
      continue;
    }
    for (int r = 0; r < ranks; ++r) {
      got.clear();
      for (const comm::TraceRecord& t : (*traces)[static_cast<size_t>(r)])
        if (training_phase(t.phase) && t.step >= 0) got.insert(t.step);
      note(step_problem(got, own, stage_file(stage, fmt::format("{}/{}", kTraceDir, comm::trace_file_name(r))), -1));
    }
  }
  return make("every view holds the contract's steps", problems.empty(),
              fmt::format("{} views of {} stages, {} differ", views, stages_of(c).size(), problems.size()),
              fmt::format("train.steps = {}: metrics, checksums and every rank's trace (a replay: its anchors; the "
                          "fault run: a prefix)",
                          c.config.train.steps),
              fmt::format("*/{}, */{}, */{}/", kMetricsFile, kChecksumsFile, kTraceDir),
              problems.empty() ? "" : problems.front());
}

// 10b. The recovery stage resumed itself: every rank's trace holds the checkpoint load of step k (its
//      agreements, phase checkpoint) and no record with a start time of the parallel stage's trace of that
//      rank (a trace copied from the uninterrupted run and relabelled would).
Criterion recovery_resumed_itself(const GateContext& c) {
  const int64_t k = c.bundle->checkpoint_step();
  const int world = c.bundle->world_size();
  std::string problem;
  auto rec = rank_traces(c.bundle->paths().recovery(), kRecoveryStage, world);
  auto par = rank_traces(c.bundle->paths().parallel(), kParallelStage, world);
  if (!rec.ok()) problem = rec.status().message();
  if (problem.empty() && !par.ok()) problem = par.status().message();
  for (int r = 0; r < world && problem.empty(); ++r) {
    const std::string file = stage_file(kRecoveryStage, fmt::format("{}/{}", kTraceDir, comm::trace_file_name(r)));
    std::set<int64_t> theirs;
    for (const comm::TraceRecord& t : (*par)[static_cast<size_t>(r)]) theirs.insert(t.t_start_us);
    bool loaded = false;
    for (const comm::TraceRecord& t : (*rec)[static_cast<size_t>(r)]) {
      loaded = loaded || (t.phase == comm::Phase::kCheckpoint && t.step == k);
      if (theirs.count(t.t_start_us) && problem.empty())
        problem = fmt::format(
            "{}: rank {}'s record seq {} (group '{}', step {}) starts at {} µs, as a record of "
            "the parallel stage's trace does: a copied trace, not a run",
            file, r, t.seq, t.group, t.step, t.t_start_us);
    }
    if (!loaded && problem.empty())
      problem = fmt::format(
          "{}: rank {} holds no checkpoint-load record of step {} (phase checkpoint): it did not "
          "resume from the checkpoint",
          file, r, k);
  }
  return make("recovery resumed from its checkpoint", problem.empty(),
              problem.empty() ? fmt::format("{} ranks loaded step {}; no record shared with the parallel run", world, k)
                              : "not a resume of its own",
              fmt::format("every rank's trace loads step {} and shares no start time with the parallel run's", k),
              fmt::format("{}/, {}/", stage_dir(kRecoveryStage, kTraceDir), stage_dir(kParallelStage, kTraceDir)),
              problem);
}

}  // namespace sp::proof::criterion
