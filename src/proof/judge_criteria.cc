#include "proof/judge_criteria.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "plan/traffic_model.h"

namespace sp::proof {
namespace {

using Row = std::pair<Criterion, JudgeDetection>;

std::string ranks_text(const std::vector<int>& r) {
  std::string s;
  for (size_t i = 0; i < r.size(); ++i) s += (i ? ", " : "") + std::to_string(r[i]);
  return s;
}
std::string pct(double x) { return fmt::format("{:.3g} %", 100 * x); }
Criterion row(std::string name, std::string threshold, std::string evidence, bool passed = false) {
  Criterion c;
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
            "every rank's seal matches its files; every step, micro-batch, tensor and anchor recorded",
            "seal/, contract.json, topology.json", true),
        {.view = "recording", .point = 0}};
  r.first.measured = fmt::format(
      "{} ranks ({} dp × {} tp × {} pp, {}), {} steps, {} micro-batches per step, {} "
      "anchors, {} files sealed",
      c.world, c.dp, c.tp, c.pp, c.strategy, c.steps, c.micro_batches, c.anchors.size(), rec.files_sealed());
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

// The model's traffic per (group, phase) of one step, summed over the ranks (the trace report's unit), without
// the engine's own world-group evidence (its exact-sum loss, norm and checksum exchanges).
std::map<std::pair<std::string, std::string>, plan::Traffic> model_cells(const JudgeContext& x) {
  std::map<std::pair<std::string, std::string>, plan::Traffic> out;
  for (int rank = 0; rank < x.recording->contract().world; ++rank)
    for (const auto& [key, t] : plan::predict_step_traffic(*x.plan, x.recording->grid(), rank, false, false))
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

Row traffic(const JudgeContext& x) {
  Row r{row("traffic equals the model of the declared strategy",
            "payload bytes per step × group × phase (forward, backward, grad_sync, optimizer) = "
            "plan/traffic_model; op counts may differ (bucketing)",
            "trace/, contract.json"),
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
  const auto model = model_cells(x);
  // A pure data-parallel run may reduce on the default (world) group: it is the one dp group.
  const std::string dp0 = grid.group_name(comm::Axis::kDp, 0);
  std::map<std::pair<int64_t, std::pair<std::string, std::string>>, int64_t> traced;
  int64_t stats_bytes = 0, traced_ops = 0, model_ops = 0;
  for (const auto& [k, t] : x.trace->traffic) {
    if (k.step < 0 || k.step >= c.steps) continue;
    if (k.phase == comm::Phase::kEvidence) stats_bytes += t.bytes;
    if (!compared_phase(k.phase)) continue;
    std::string g = k.group == "world" && c.tp == 1 && c.pp == 1 ? dp0 : k.group;
    traced[{k.step, {g, std::string(comm::phase_name(k.phase))}}] += t.bytes;
    traced_ops += t.ops;
  }
  for (const auto& [key, t] : model) model_ops += t.ops * c.steps;
  int64_t cells = 0;
  for (int64_t s = 0; s < c.steps && !r.second.found; ++s) {
    std::set<std::pair<std::string, std::string>> keys;
    for (const auto& [k, b] : model) keys.insert(k);
    for (auto it = traced.lower_bound({s, {}}); it != traced.end() && it->first.first == s; ++it)
      keys.insert(it->first.second);
    for (const auto& key : keys) {
      ++cells;
      const int64_t want = model.count(key) ? model.at(key).bytes : 0;
      const int64_t got = traced.count({s, key}) ? traced.at({s, key}) : 0;
      if (got == want) continue;
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
                                        key.first, got, c.strategy, want),
                  .evidence = "trace/"};
      r.first.detail = r.second.detail;
      break;
    }
  }
  r.first.passed = !r.second.found;
  r.first.measured = fmt::format(
      "{} cells of {} steps {}; ops {} traced, {} in the model; statistics (phase "
      "evidence, not compared) {} bytes",
      cells, c.steps, r.first.passed ? "equal" : "differ", traced_ops, model_ops, stats_bytes);
  return r;
}

// The weight each micro-batch's token losses carry in the gradient the run applies: objective / loss_sum /
// gradient_divisor. The single-device loss gives every micro-batch 1 / N (N: the global batch's targets).
Row loss(const JudgeContext& x) {
  const Recording& rec = *x.recording;
  const RecordingContract& c = rec.contract();
  Row r{row("loss and its reduction equal the single-device training",
            "per-token mean over the global batch (weights 1/N within 2^-16); at anchors the loss and each "
            "micro-batch's loss sum within the loss tolerance",
            "records/, tokens/"),
        {.view = "loss", .point = 3, .evidence = "records/"}};
  int64_t token_mean = 0, mb_mean = 0;
  for (int64_t s = 0; s < c.steps; ++s) {
    const double N = static_cast<double>(x.assembly.targets.at(s));
    bool tm = true, mm = true;
    for (const auto& [l, rank] : rec.losses(s)) {
      if (l.loss_sum == 0) continue;
      const double w = l.objective / l.loss_sum / static_cast<double>(c.gradient_divisor);
      tm = tm && std::abs(w * N - 1) <= 1.52587890625e-05;
      mm = mm && std::abs(w * static_cast<double>(l.targets * c.micro_batches) - 1) <= 1.52587890625e-05;
      if (!tm && !r.second.found)
        r.second = {.view = "loss",
                    .point = 3,
                    .found = true,
                    .step = s,
                    .tensor = "loss",
                    .ranks = {rank},
                    .detail = fmt::format("step {}: micro-batch {} ({} targets) enters the gradient with weight {:.6g} "
                                          "per token; the single-device loss gives 1/N = {:.6g} (N = {})",
                                          s, l.index, l.targets, w, 1 / N, static_cast<int64_t>(N)),
                    .evidence = rank_records(rank)};
    }
    token_mean += tm ? 1 : 0;
    mb_mean += (!tm && mm) ? 1 : 0;
  }
  const std::string semantics =
      token_mean == c.steps ? "per-token mean over the global batch"
      : mb_mean > 0 ? "per-micro-batch mean (each micro-batch's token mean, averaged): not the single-device loss"
                    : "another weighting of the micro-batches: not the single-device loss";
  if (r.second.found) r.second.detail += "; the run's loss: " + semantics;
  double worst = 0;
  for (const AnchorResult& a : x.anchors) {
    worst = std::max({worst, a.loss_rel / a.tol.loss, a.worst_micro_batch_rel / a.tol.loss});
    const bool bad = !(a.loss_rel <= a.tol.loss) || !(a.worst_micro_batch_rel <= a.tol.loss);
    if (bad && (!r.second.found || a.step < r.second.step))
      r.second = {
          .view = "loss",
          .point = 3,
          .found = true,
          .step = a.step,
          .tensor = "loss",
          .ranks = {a.worst_micro_batch_rank},
          .detail = fmt::format("step {}: loss {:.9g} vs the engine's {:.9g} on the recorded batch (rel {:.3g}, "
                                "tolerance {:.3g}); micro-batch {}'s loss sum (rank {}) differs by {:.3g}",
                                a.step, a.loss_run, a.loss_ref, a.loss_rel, a.tol.loss, a.worst_micro_batch,
                                a.worst_micro_batch_rank, a.worst_micro_batch_rel),
          .evidence = rank_records(a.worst_micro_batch_rank)};
  }
  r.first.passed = !r.second.found;
  r.first.measured = fmt::format("{}: {} of {} steps; {} anchors, worst {} of the tolerance; declared \"{}\"",
                                 semantics, token_mean, c.steps, x.anchors.size(), pct(worst), c.loss_reduction);
  r.first.detail = r.second.detail;
  return r;
}

Row replicas(const JudgeContext& x) {
  const Assembly& as = x.assembly;
  Row r{row("replicated state bitwise equal across replicas",
            "every piece held by several ranks (dp replicas, TP-replicated norms): the same SHA-256, "
            "gradients and parameters",
            "records/"),
        {.view = "replicas", .point = 4, .evidence = "records/"}};
  r.first.passed = as.replica_mismatches.empty();
  r.first.measured = fmt::format(
      "{} pieces held by several ranks ({} holders in all) over the checksum steps: {}", as.replica_sets,
      as.replica_holders, r.first.passed ? "bitwise equal" : fmt::format("{} differ", as.replica_mismatches.size()));
  if (!r.first.passed) {
    const ReplicaMismatch& m = as.replica_mismatches.front();
    r.second = {
        .view = "replicas",
        .point = m.phase == "grad" ? 4 : 7,
        .found = true,
        .step = m.step,
        .phase = m.phase,
        .tensor = m.tensor,
        .ranks = m.ranks,
        .detail = m.ranks.size() == m.all.size()
                      ? fmt::format("step {} {} {} ({}, {}): ranks {} hold different bits, none a majority", m.step,
                                    m.phase, m.tensor, m.kind, m.piece, ranks_text(m.all))
                      : fmt::format("step {} {} {} ({}, {}): {} {} departs from the bits of the other holders "
                                    "(ranks {})",
                                    m.step, m.phase, m.tensor, m.kind, m.piece, m.ranks.size() == 1 ? "rank" : "ranks",
                                    ranks_text(m.ranks), ranks_text(m.all)),
        .evidence = "records/"};
    r.first.detail = r.second.detail;
  }
  return r;
}

Row gradients(const JudgeContext& x) {
  Row r{row("anchored gradients equal the engine's single-device gradient",
            "per tensor ‖Δg‖/‖g‖ ≤ (√(R·K) + T)·u·√N (docs/equivalence.md §7)", "anchors/, tokens/"),
        {.view = "gradients", .point = 5, .evidence = "anchors/"}};
  double worst = 0;
  int64_t tensors = 0;
  for (const AnchorResult& a : x.anchors) {
    const TensorError* bad = nullptr;
    for (const TensorError& e : a.grads) {
      ++tensors;
      worst = std::max(worst, e.rel / a.tol.grad);
      if (!(e.rel <= a.tol.grad) && (bad == nullptr || e.rel > bad->rel)) bad = &e;
    }
    if (bad != nullptr && !r.second.found)
      r.second = {.view = "gradients",
                  .point = 5,
                  .found = true,
                  .step = a.step,
                  .phase = "grad",
                  .tensor = bad->tensor,
                  .detail = fmt::format("step {}: {} differs from the engine's gradient by {:.3g} (relative L2), "
                                        "tolerance {:.3g}",
                                        a.step, bad->tensor, bad->rel, a.tol.grad),
                  .evidence = fmt::format("anchors/step-{:06d}/", a.step)};
  }
  r.first.passed = !r.second.found && !x.anchors.empty();
  r.first.measured = fmt::format("{} anchors × {} tensors; worst {} of the tolerance", x.anchors.size(),
                                 x.anchors.empty() ? 0 : tensors / static_cast<int64_t>(x.anchors.size()), pct(worst));
  r.first.detail = x.anchors.empty() ? "no anchor was recorded: nothing to compare" : r.second.detail;
  return r;
}

Row update(const JudgeContext& x) {
  Row r{row("anchored update equals the engine's AdamW",
            "each rank's clip norm within 2·√Ψ·u of the logical gradient's; per tensor ‖Δp‖/‖p‖ ≤ 16u",
            "anchors/, records/"),
        {.view = "update", .point = 6, .evidence = "anchors/"}};
  if (!x.norm_errors.empty()) {
    const NormError& e = x.norm_errors.front();
    std::vector<int> wrong;
    for (const NormError& o : x.norm_errors)
      if (o.step == e.step) wrong.push_back(o.rank);
    r.second = {
        .view = "update",
        .point = 6,
        .found = true,
        .step = e.step,
        .phase = "clip",
        .tensor = "grad_norm",
        .ranks = wrong,
        .detail = fmt::format("step {}: rank {} clipped with gradient norm {:.9g}; the logical gradient's norm is "
                              "{:.9g} (rel {:.3g}); {} of {} ranks clipped with another norm",
                              e.step, e.rank, e.recorded, e.global, e.rel, wrong.size(), x.recording->contract().world),
        .evidence = rank_records(e.rank)};
  }
  double worst = 0;
  int64_t bitwise = 0, tensors = 0;
  for (const AnchorResult& a : x.anchors) {
    const TensorError* bad = nullptr;
    for (const TensorError& e : a.update) {
      ++tensors;
      bitwise += e.bitwise ? 1 : 0;
      worst = std::max(worst, e.rel / a.tol.update);
      if (!(e.rel <= a.tol.update) && bad == nullptr) bad = &e;
    }
    if (bad != nullptr && (!r.second.found || a.step < r.second.step))
      r.second = {.view = "update",
                  .point = 6,
                  .found = true,
                  .step = a.step,
                  .phase = "param",
                  .tensor = bad->tensor,
                  .ranks = bad->ranks,
                  .detail = fmt::format(
                      "step {}: {} after the step differs from the engine's AdamW on the recorded "
                      "state by {:.3g} (relative L2), tolerance {:.3g}; its state and result were recorded by ranks {}",
                      a.step, bad->tensor, bad->rel, a.tol.update, ranks_text(bad->ranks)),
                  .evidence = fmt::format("anchors/step-{:06d}/", a.step)};
  }
  r.first.passed = !r.second.found;
  r.first.measured = fmt::format("{} clip norms ({} wrong); {} anchored tensors, {} bitwise, worst {} of the tolerance",
                                 x.norm_checks, x.norm_errors.size(), tensors, bitwise, pct(worst));
  r.first.detail = r.second.detail;
  return r;
}

Row resume(const JudgeContext& x) {
  Row r{row("resume continues from exactly the saved state",
            "every rank's loaded parameters and AdamW moments = what it saved", "records/"),
        {.view = "resume", .point = 8, .evidence = "records/"}};
  int64_t resumes = 0, states = 0;
  for (int rank = 0; rank < x.recording->contract().world && !r.second.found; ++rank) {
    const RankRecords& rr = x.recording->ranks()[static_cast<size_t>(rank)];
    for (const StateRecord& res : rr.resumes) {
      ++resumes;
      const StateRecord* save = nullptr;
      for (const StateRecord& s : rr.saves)
        if (s.step == res.step) save = &s;
      const auto found = [&](std::string tensor, std::string what) {
        r.second = {.view = "resume",
                    .point = 8,
                    .found = true,
                    .step = res.step,
                    .phase = "resume",
                    .tensor = tensor,
                    .ranks = {rank},
                    .detail = what,
                    .evidence = rank_records(rank)};
      };
      if (save == nullptr) {
        found("", fmt::format("rank {} resumed at step {} from a state it never recorded saving", rank, res.step));
        break;
      }
      for (const StateDigest& want : save->states) {
        ++states;
        const StateDigest* got = nullptr;
        for (const StateDigest& g : res.states)
          if (g.tensor == want.tensor && g.state == want.state && g.shard == want.shard) got = &g;
        if (got == nullptr || got->sha256 != want.sha256 || got->optimizer_step != want.optimizer_step) {
          found(want.tensor,
                fmt::format("step {}: rank {} resumed {} of {} {} what it saved ({})", res.step, rank, want.state,
                            want.tensor, got == nullptr || !got->sha256 ? "without" : "different from",
                            got == nullptr || !got->sha256
                                ? "the state is absent after loading"
                                : fmt::format("step count {} vs {}", got->optimizer_step, want.optimizer_step)));
          break;
        }
      }
      if (r.second.found) break;
    }
  }
  r.first.required = resumes > 0;
  r.first.passed = !r.second.found;
  r.first.measured = resumes == 0 ? "no resume recorded: not exercised"
                                  : fmt::format("{} rank resumes, {} saved states compared", resumes, states);
  r.first.detail = r.second.detail;
  return r;
}

Row records_agree(const JudgeContext& x) {
  Row r{row("records agree across views",
            "at every anchor with checksums: the engine's summary of the anchor's gradients and parameters "
            "= the assembled checksum records, bit for bit",
            "anchors/, records/"),
        {.view = "records", .point = 0}};
  int64_t n = 0;
  std::vector<std::string> bad;
  for (const AnchorResult& a : x.anchors) {
    n += x.recording->contract().checksums_at(a.step) ? 2 * static_cast<int64_t>(a.grads.size()) : 0;
    bad.insert(bad.end(), a.disagreements.begin(), a.disagreements.end());
  }
  r.first.passed = bad.empty();
  r.first.measured = fmt::format("{} anchor tensors against their checksum records: {}", n,
                                 bad.empty() ? "equal" : fmt::format("{} differ", bad.size()));
  if (!bad.empty()) r.first.detail = bad.front();
  return r;
}

}  // namespace

const std::vector<JudgeRule>& judge_criteria() {
  static const std::vector<JudgeRule> rules = {
      {"recording", sealed},  {"collectives", collectives}, {"traffic", traffic},
      {"replicas", replicas}, {"gradients", gradients},     {"update", update},
      {"loss", loss},         {"resume", resume},           {"records", records_agree}};
  return rules;
}

}  // namespace sp::proof
