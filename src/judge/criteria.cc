#include "judge/criteria.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "judge/criteria_rows.h"

namespace sp::judge {
namespace criterion {
namespace {

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

}  // namespace
}  // namespace criterion

const std::vector<JudgeRule>& judge_criteria() {
  using namespace criterion;
  static const std::vector<JudgeRule> rules = {
      {"recording", sealed},  {"collectives", collectives}, {"traffic", traffic},
      {"replicas", replicas}, {"gradients", gradients},     {"update", update},
      {"loss", loss},         {"resume", resume},           {"records", records_agree}};
  return rules;
}

}  // namespace sp::judge
