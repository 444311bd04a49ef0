#include "judge/criteria.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "judge/criteria_rows.h"

namespace sp::judge {
namespace criterion {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The weight each micro-batch's token losses carry in the gradient the run applies: objective / loss_sum /
// gradient_divisor. The single-device loss gives every micro-batch 1 / N (N: the global batch's targets).
Row loss(const JudgeContext& x) {
  const Recording& rec = *x.recording;
  const RecordingContract& c = rec.contract();
  Row r{row("loss and its reduction equal the single-device training",
            "per-token mean over the global batch (weights 1/N within 2^-16) at every step; the loss and each "
            "micro-batch's loss sum equal the engine's on the recorded batch within the loss tolerance",
            "records/, tokens/"),
        {.view = "loss", .point = 4, .evidence = "records/"}};
  int64_t token_mean = 0, mb_mean = 0;
  double scale = 0;  // the factor of a uniform weight k/N, when every micro-batch has one
  for (int64_t s = 0; s < c.steps; ++s) {
    const double N = static_cast<double>(x.assembly.targets.at(s));
    bool tm = true, mm = true;
    for (const auto& [l, rank] : rec.losses(s)) {
      if (!std::isfinite(l.loss_sum) || !std::isfinite(l.objective)) {
        if (!r.second.found)
          r.second = {.view = "loss",
                      .point = 4,
                      .found = true,
                      .step = s,
                      .tensor = "loss",
                      .ranks = {rank},
                      .detail = fmt::format("step {}: micro-batch {}'s loss sum is {} (objective {}): the run "
                                            "diverged at this step",
                                            s, l.index, l.loss_sum, l.objective),
                      .evidence = rank_records(rank),
                      .ratio = kInf,
                      .steps_failing = 1,
                      .pattern = "a non-finite loss: the forward produced NaN or Inf"};
        tm = false;
        continue;
      }
      if (l.loss_sum == 0) continue;
      const double w = l.objective / l.loss_sum / static_cast<double>(c.gradient_divisor);
      tm = tm && std::abs(w * N - 1) <= 1.52587890625e-05;
      mm = mm && std::abs(w * static_cast<double>(l.targets * c.micro_batches) - 1) <= 1.52587890625e-05;
      if (!tm && !r.second.found) {
        scale = w * N;
        r.second = {.view = "loss",
                    .point = 4,
                    .found = true,
                    .step = s,
                    .tensor = "loss",
                    .ranks = {rank},
                    .detail = fmt::format("step {}: micro-batch {} ({} targets) enters the gradient with weight "
                                          "{:.6g} per token; the single-device loss gives 1/N = {:.6g} (N = {})",
                                          s, l.index, l.targets, w, 1 / N, static_cast<int64_t>(N)),
                    .evidence = rank_records(rank),
                    .ratio = std::abs(w * N - 1) / 1.52587890625e-05,
                    .steps_failing = 1};
      }
    }
    token_mean += tm ? 1 : 0;
    mb_mean += (!tm && mm) ? 1 : 0;
  }
  const std::string semantics =
      token_mean == c.steps ? "per-token mean over the global batch"
      : mb_mean > 0 ? "per-micro-batch mean (each micro-batch's token mean, averaged): not the single-device loss"
                    : "another weighting of the micro-batches: not the single-device loss";
  if (r.second.found && r.second.pattern.empty()) {
    r.second.detail += "; the run's loss: " + semantics;
    r.second.pattern = mb_mean > 0 ? "a per-micro-batch mean: each micro-batch's token mean, averaged"
                                   : fmt::format(
                                         "weights {:.6g} × 1/N: the loss scaled by {:.6g} (divided by "
                                         "another count than the global batch's targets)",
                                         scale, scale);
    r.second.steps_failing = c.steps - token_mean;
  }
  double worst = 0;
  int64_t checked = 0, failing = 0;
  for (const StepResult& a : x.steps) {
    if (!a.checked) continue;
    ++checked;
    worst = std::max({worst, a.loss_rel / a.tol.loss, a.worst_micro_batch_rel / a.tol.loss});
    const bool bad = !(a.loss_rel <= a.tol.loss) || !(a.worst_micro_batch_rel <= a.tol.loss);
    failing += bad ? 1 : 0;
    if (bad && (!r.second.found || a.step < r.second.step))
      r.second = {
          .view = "loss",
          .point = 4,
          .found = true,
          .step = a.step,
          .tensor = "loss",
          .ranks = {a.worst_micro_batch_rank},
          .detail = fmt::format("step {}: loss {:.9g} vs the engine's {:.9g} on the recorded batch (rel {:.3g}, "
                                "tolerance {:.3g}); micro-batch {}'s loss sum (rank {}) differs by {:.3g}",
                                a.step, a.loss_run, a.loss_ref, a.loss_rel, a.tol.loss, a.worst_micro_batch,
                                a.worst_micro_batch_rank, a.worst_micro_batch_rel),
          .evidence = rank_records(a.worst_micro_batch_rank),
          .ratio = std::max(a.loss_rel, a.worst_micro_batch_rel) / a.tol.loss,
          .pattern = a.worst_micro_batch_rel > 10 * a.loss_rel || a.loss_rel <= a.tol.loss
                         ? fmt::format("micro-batch {}'s loss sum is {:.3g} off while the step's loss is {:.3g} off: "
                                       "its loss was computed against other targets (labels of another "
                                       "micro-batch?)",
                                       a.worst_micro_batch, a.worst_micro_batch_rel, a.loss_rel)
                     : !a.grad_pattern.empty()
                         ? "the forward computes another function on the same ids; " + a.grad_pattern
                         : "the forward computes another function than Hugging Face LLaMA's on "
                           "the same ids (the model's math: RoPE, norm, attention mask)"};
  }
  if (r.second.found && r.second.view == "loss" && r.second.steps_failing == 0) r.second.steps_failing = failing;
  r.first.passed = !r.second.found;
  r.first.measured = fmt::format(
      "{}: {} of {} steps; the engine's loss at {} of {} steps, worst {} of the tolerance; "
      "declared \"{}\"",
      semantics, token_mean, c.steps, checked, c.steps, pct(worst), c.loss_reduction);
  r.first.detail = r.second.detail;
  return r;
}

Row replicas(const JudgeContext& x) {
  const Assembly& as = x.assembly;
  Row r{row("replicated state bitwise equal across replicas",
            "every piece held by several ranks (dp replicas, TP-replicated norms): the same bits (its SHA-256, or "
            "the digest lanes of all its elements), "
            "gradients and parameters",
            "records/"),
        {.view = "replicas", .point = 5, .evidence = "records/"}};
  r.first.passed = as.replica_mismatches.empty();
  r.first.measured = fmt::format(
      "{} pieces held by several ranks ({} holders in all) over the checksum steps: {}", as.replica_sets,
      as.replica_holders, r.first.passed ? "bitwise equal" : fmt::format("{} differ", as.replica_mismatches.size()));
  if (!r.first.passed) {
    const ReplicaMismatch& m = as.replica_mismatches.front();
    std::set<int64_t> steps;
    int64_t tensors = 0;
    for (const ReplicaMismatch& o : as.replica_mismatches) {
      steps.insert(o.step);
      tensors += o.step == m.step && o.phase == m.phase ? 1 : 0;
    }
    const bool none = m.ranks.size() == m.all.size();
    r.second = {
        .view = "replicas",
        .point = m.phase == "grad" ? 5 : 9,
        .found = true,
        .step = m.step,
        .phase = m.phase,
        .tensor = m.tensor,
        .ranks = m.ranks,
        .detail = none ? fmt::format("step {} {} {} ({}, {}): ranks {} hold different bits, none a majority", m.step,
                                     m.phase, m.tensor, m.kind, m.piece, ranks_text(m.all))
                       : fmt::format("step {} {} {} ({}, {}): {} {} departs from the bits of the other holders "
                                     "(ranks {})",
                                     m.step, m.phase, m.tensor, m.kind, m.piece, m.ranks.size() == 1 ? "rank" : "ranks",
                                     ranks_text(m.ranks), ranks_text(m.all)),
        .evidence = "records/",
        .ratio = kInf,
        .tensors_failing = tensors,
        .steps_failing = static_cast<int64_t>(steps.size()),
        .pattern = m.phase == "grad"
                       ? (m.kind == "dp replicas"
                              ? "dp replicas' gradients differ: a gradient not all-reduced (a bucket or tensor left "
                                "out of the synchronization)"
                              : "tp-replicated gradients differ across tp ranks: a partial sum never reduced (the "
                                "copy/reduce pair placed around the wrong op)")
                       : "replicas' parameters differ after the update: the replicas stepped differently"};
    r.first.detail = r.second.detail;
  }
  return r;
}

// The steps a view could not check, as text ("steps 1, 3, 5 (3 of 40)").
std::string unchecked_text(const JudgeContext& x) {
  const std::vector<int64_t> u = x.unchecked_steps();
  if (u.empty()) return "";
  std::string s;
  for (size_t i = 0; i < u.size() && i < 12; ++i) s += (i ? ", " : "") + std::to_string(u[i]);
  if (u.size() > 12) s += ", ...";
  return fmt::format("; UNVERIFIED at {} of {} steps ({}): {}", u.size(), x.steps.size(), s,
                     x.steps[static_cast<size_t>(u.front())].unchecked);
}

Row gradients(const JudgeContext& x) {
  Row r{row("gradients equal the engine's single-device gradient at every step",
            x.recording->contract().sixteen_bit()
                ? "per tensor ‖Δg‖/‖g‖ ≤ the 16-bit envelope 2·√R₁₆·u/√3 of the run's 16-bit roundings and the "
                  "engine's 16-bit casts (docs/equivalence.md §8), finite; fp16: steps GradScaler skipped not compared"
                : "per tensor ‖Δg‖/‖g‖ ≤ (√(R·K) + T)·u·√N (docs/equivalence.md §7), finite",
            "grads/, tokens/"),
        {.view = "gradients", .point = 6, .evidence = "grads/"}};
  double worst = 0;
  int64_t tensors = 0, checked = 0, failing = 0, skipped = 0;
  for (const StepResult& a : x.steps) {
    if (!a.checked) continue;
    if (a.overflow) {  // GradScaler skipped it: its gradients hold the overflow (the scaler row checks that)
      ++skipped;
      continue;
    }
    ++checked;
    const TensorError* bad = nullptr;
    int64_t n_bad = 0;
    for (const TensorError& e : a.grads) {
      ++tensors;
      const double ratio = e.nonfinite > 0 ? kInf : e.rel / a.tol.grad;
      worst = std::max(worst, ratio);
      if (ratio <= 1) continue;
      ++n_bad;
      if (bad == nullptr || ratio > (bad->nonfinite > 0 ? kInf : bad->rel / a.tol.grad)) bad = &e;
    }
    failing += n_bad > 0 ? 1 : 0;
    if (bad != nullptr && !r.second.found)
      r.second = {.view = "gradients",
                  .point = 6,
                  .found = true,
                  .step = a.step,
                  .phase = "grad",
                  .tensor = bad->tensor,
                  .ranks = bad->ranks,
                  .detail = bad->nonfinite > 0
                                ? fmt::format("step {}: {} holds {} NaN or infinite values", a.step, bad->tensor,
                                              bad->nonfinite)
                                : fmt::format("step {}: {} differs from the engine's gradient by {:.3g} (relative "
                                              "L2), {:.3g}× its tolerance {:.3g}",
                                              a.step, bad->tensor, bad->rel, bad->rel / a.tol.grad, a.tol.grad),
                  .evidence = recording_step_file(x.recording->contract().every_step() ? kGradsDir : kAnchorsDir,
                                                  a.step, bad->ranks.empty() ? 0 : bad->ranks.front()),
                  .ratio = bad->nonfinite > 0 ? kInf : bad->rel / a.tol.grad,
                  .tensors_failing = n_bad,
                  .pattern = a.grad_pattern};
  }
  if (r.second.found) r.second.steps_failing = failing;
  r.first.passed = !r.second.found;  // no step checked: every step UNVERIFIED, never PASS
  r.first.measured =
      fmt::format("{} of {} steps × {} tensors; worst {} of the tolerance{}{}", checked, x.steps.size(),
                  checked == 0 ? 0 : tensors / checked, pct(worst),
                  skipped > 0 ? fmt::format("; {} steps skipped by GradScaler (overflow): not compared", skipped) : "",
                  unchecked_text(x));
  // Every step skipped: nothing compared, which the verdict says (UNVERIFIED: JudgeContext::gradients_uncompared).
  r.first.detail = checked == 0 ? (skipped > 0 ? "GradScaler skipped every step: no gradient was compared"
                                               : "no step could be checked: nothing to compare")
                                : r.second.detail;
  return r;
}

Row update(const JudgeContext& x) {
  const bool v2 = x.recording->contract().every_step();
  Row r{row("update equals the engine's AdamW replay at every step",
            v2 ? "each rank's clip norm within the fp32 bound γ_k of the logical gradient's; every tensor's parameters "
                 "after the "
                 "step bit for bit the replay's (the declared betas, eps, decay and no-decay set)"
               : "each rank's clip norm within the fp32 bound γ_k of the logical gradient's; at anchors ‖Δp‖/‖p‖ ≤ 16u",
            v2 ? "grads/, state/, records/" : "anchors/, records/"),
        {.view = "update", .point = 8, .evidence = v2 ? "records/" : "anchors/"}};
  if (!x.norm_errors.empty()) {
    const NormError& e = x.norm_errors.front();
    std::vector<int> wrong;
    std::set<int64_t> steps;
    for (const NormError& o : x.norm_errors) {
      steps.insert(o.step);
      if (o.step == e.step) wrong.push_back(o.rank);
    }
    r.second = {
        .view = "update",
        .point = 8,
        .found = true,
        .step = e.step,
        .phase = "clip",
        .tensor = "grad_norm",
        .ranks = wrong,
        .detail = fmt::format("step {}: rank {} clipped with gradient norm {:.9g}; the logical gradient's norm is "
                              "{:.9g} (rel {:.3g}); {} of {} ranks clipped with another norm",
                              e.step, e.rank, e.recorded, e.global, e.rel, wrong.size(), x.recording->contract().world),
        .evidence = rank_records(e.rank),
        .ratio = e.rel / foreign_tolerances(x.recording->contract(), x.assembly.targets.at(e.step)).norm,
        .steps_failing = static_cast<int64_t>(steps.size()),
        .pattern = e.pattern};
  }
  double worst = 0;
  int64_t bitwise = 0, tensors = 0, checked = 0;
  std::set<int64_t> failing;
  for (const StepResult& a : x.steps) {
    if (!a.checked) continue;
    ++checked;
    const TensorError* bad = nullptr;
    int64_t n_bad = 0;
    for (const TensorError& e : a.update) {
      ++tensors;
      bitwise += e.bitwise ? 1 : 0;
      const bool fails = v2 ? !e.bitwise : !(e.rel <= a.tol.update);
      worst = std::max(worst, v2 ? (e.bitwise ? 0.0 : e.rel / a.tol.update) : e.rel / a.tol.update);
      if (!fails) continue;
      ++n_bad;
      if (bad == nullptr || e.rel > bad->rel) bad = &e;
    }
    if (bad == nullptr) continue;
    failing.insert(a.step);
    if (!r.second.found || a.step < r.second.step)
      r.second = {
          .view = "update",
          .point = 8,
          .found = true,
          .step = a.step,
          .phase = "param",
          .tensor = bad->tensor,
          .ranks = bad->ranks,
          .detail = v2 ? fmt::format("step {}: {} after the step is not the engine's AdamW replay of the recorded "
                                     "state, gradient, lr {:.6g} and clip coefficient {:.6g} (its norm differs by at "
                                     "least {:.3g} relative); {} of {} tensors differ",
                                     a.step, bad->tensor, x.recording->ranks()[0].steps[a.step].lr, a.coefficient,
                                     bad->rel, n_bad, a.update.size())
                       : fmt::format("step {}: {} after the step differs from the engine's AdamW on the recorded "
                                     "state by {:.3g} (relative L2), tolerance {:.3g}; its state and result were "
                                     "recorded by ranks {}",
                                     a.step, bad->tensor, bad->rel, a.tol.update, ranks_text(bad->ranks)),
          .evidence = v2 ? rank_records(0) : fmt::format("anchors/step-{:06d}/", a.step),
          .ratio = bad->rel / a.tol.update,
          .tensors_failing = n_bad,
          .pattern = a.update_pattern};
  }
  if (r.second.found && r.second.phase == "param") r.second.steps_failing = static_cast<int64_t>(failing.size());
  r.first.passed = !r.second.found;
  r.first.measured = fmt::format("{} clip norms ({} wrong); {} of {} steps replayed, {} tensors, {} bitwise{}{}",
                                 x.norm_checks, x.norm_errors.size(), checked, x.steps.size(), tensors, bitwise,
                                 v2 ? "" : fmt::format(", worst {} of the tolerance", pct(worst)), unchecked_text(x));
  r.first.detail = r.second.detail;
  return r;
}

}  // namespace
}  // namespace criterion

const std::vector<JudgeRule>& judge_criteria() {
  using namespace criterion;
  static const std::vector<JudgeRule> rules = {{"recording", sealed},
                                               {"collectives", collectives},
                                               {"traffic", traffic},
                                               {"data", data},
                                               {"replicas", replicas},
                                               {"gradients", gradients},
                                               {"lr", lr},
                                               {"update", update},
                                               {"loss", loss},
                                               {"resume", resume},
                                               {"records", records_agree},
                                               {"precision", precision},
                                               {"rounding", rounding, has_probe},
                                               {"scaler", scaler, has_grad_scaler}};
  return rules;
}

}  // namespace sp::judge
