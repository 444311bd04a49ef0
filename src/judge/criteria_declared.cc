// The judge's criteria on what a run declares and what any training holds (judge/criteria_rows.h): its data
// (a micro-batch repeated within a global batch: every dp rank the same data) and its learning rate (every rank's
// and its optimizer's groups' agree at every step, and follow the schedule when it is declared as data) and the
// precision of its gradients (a gradient declared fp32 that holds bf16 numbers was rounded on its way) and, in fp16,
// its GradScaler's decisions (against the engine's loss scaler, on the recorded overflows).
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "judge/criteria_rows.h"
#include "optim/loss_scaler.h"

namespace sp::judge::criterion {

Row data(const JudgeContext& x) {
  const RecordingContract& c = x.recording->contract();
  Row r{row("data: no micro-batch repeated within a global batch",
            "every micro-batch of a step holds other ids than the step's others (repeats across steps are named)",
            "tokens/"),
        {.view = "data", .point = 3, .evidence = "tokens/"}};
  int64_t within = 0, across = 0;
  std::set<int64_t> steps;
  for (const DataRepeat& d : x.repeats) {
    if (d.step != d.first_step) {
      ++across;
      continue;
    }
    ++within;
    steps.insert(d.step);
    if (r.second.found) continue;
    const bool ranks = d.rank != d.first_rank;
    r.second = {
        .view = "data",
        .point = 3,
        .found = true,
        .step = d.step,
        .tensor = "tokens",
        .ranks = {d.first_rank, d.rank},
        .detail = fmt::format("step {}: micro-batch {} (rank {}) holds the same ids as micro-batch {} (rank {})",
                              d.step, d.index, d.rank, d.first_index, d.first_rank),
        .evidence = recording_tokens_file(d.rank, d.step),
        .ratio = std::numeric_limits<double>::infinity(),
        .pattern = ranks ? "the dp ranks trained the same micro-batches (a sampler that ignores the rank: "
                           "every rank the same data)"
                         : "one micro-batch drawn twice within the global batch"};
  }
  if (r.second.found) r.second.steps_failing = static_cast<int64_t>(steps.size());
  std::string note;
  for (const DataRepeat& d : x.repeats)
    if (d.step != d.first_step) {
      note = fmt::format(
          "; step {} micro-batch {} repeats step {} micro-batch {} (across steps: an epoch "
          "boundary, or data resumed from the wrong position)",
          d.step, d.index, d.first_step, d.first_index);
      break;
    }
  r.first.passed = !r.second.found;
  r.first.measured = fmt::format("{} steps × {} micro-batches: {} repeated within a step, {} across steps{}", c.steps,
                                 c.micro_batches, within, across, note);
  r.first.detail = r.second.detail;
  return r;
}

Row lr(const JudgeContext& x) {
  const Recording& rec = *x.recording;
  const RecordingContract& c = rec.contract();
  Row r{row("learning rate as declared",
            "every rank's recorded lr and its optimizer's groups' lr are one value at every step; with a schedule "
            "declared as data, that value is the schedule's (within 2^-40)",
            "records/, contract.json"),
        {.view = "lr", .point = 7, .evidence = "records/"}};
  int64_t groups = 0, scheduled = 0;
  std::set<int64_t> failing;
  const auto found = [&](int64_t s, int rank, std::string detail, std::string pattern) {
    failing.insert(s);
    if (r.second.found) return;
    r.second = {.view = "lr",
                .point = 7,
                .found = true,
                .step = s,
                .tensor = "lr",
                .ranks = {rank},
                .detail = std::move(detail),
                .evidence = rank_records(rank),
                .ratio = std::numeric_limits<double>::infinity(),
                .pattern = std::move(pattern)};
  };
  for (int64_t s = 0; s < c.steps; ++s) {
    const double lr0 = rec.ranks()[0].steps[static_cast<size_t>(s)].lr;
    for (int rank = 0; rank < c.world; ++rank) {
      const StepRecord& st = rec.ranks()[static_cast<size_t>(rank)].steps[static_cast<size_t>(s)];
      if (!std::isfinite(st.lr) || st.lr != lr0)
        found(s, rank, fmt::format("step {}: rank {} recorded lr {:.9g}, rank 0 {:.9g}", s, rank, st.lr, lr0),
              "the ranks' learning rates disagree");
      if (!st.has_group_lr) continue;
      for (double g : st.group_lr) {
        ++groups;
        if (g != st.lr)
          found(s, rank,
                fmt::format("step {}: rank {}'s optimizer stepped with lr {:.9g} in a group; the step recorded "
                            "{:.9g}",
                            s, rank, g, st.lr),
                fmt::format("the optimizer's group held {:.6g} × the recorded lr", g / st.lr));
      }
    }
    if (!c.schedule) continue;
    ++scheduled;
    const double want = c.schedule->at(s);
    if (std::abs(lr0 - want) <= kScheduleRtol * std::abs(want)) continue;
    std::string pattern;
    for (int64_t o = 0; o < c.steps && pattern.empty(); ++o)
      if (std::abs(c.schedule->at(o) - lr0) <= kScheduleRtol * std::abs(lr0) && o != s)
        pattern = fmt::format("the lr is the schedule's at step {}: the schedule {} by {} steps{}", o,
                              o < s ? "restarted or behind" : "ahead", std::abs(s - o),
                              o == 0 ? " (restarted, e.g. at a resume)" : "");
    found(s, 0,
          fmt::format("step {}: lr {:.9g}, the declared schedule ({}) gives {:.9g}", s, lr0, c.schedule->to_string(),
                      want),
          pattern.empty() ? fmt::format("lr {:.6g} × the schedule's", lr0 / want) : pattern);
  }
  if (r.second.found) r.second.steps_failing = static_cast<int64_t>(failing.size());
  r.first.passed = !r.second.found;
  r.first.measured = fmt::format(
      "{} steps × {} ranks agree{}; {}", c.steps, c.world,
      groups > 0 ? fmt::format(", {} optimizer group lrs", groups) : "",
      c.schedule ? fmt::format("the schedule ({}) at {} steps", c.schedule->to_string(), scheduled)
                 : fmt::format("schedule declared as text (\"{}\"): not checked", c.schedule_text.substr(0, 60)));
  r.first.detail = r.second.detail;
  return r;
}

Row precision(const JudgeContext& x) {
  const RecordingContract& c = x.recording->contract();
  Row r{row("precision: fp32 gradients hold fp32 numbers",
            "no gradient the declared precision computes in fp32 (" +
                std::string(c.param_bf16 ? "bf16 parameters: none"
                            : c.autocast_bf16 || c.autocast_fp16
                                ? "under autocast: the norm weights and an untied embedding"
                                : "fp32: every one") +
                ") has more than half of its ≥ 32 nonzero values exact bf16 numbers (by chance: ≤ 2^-3n; "
                "docs/equivalence.md §8)",
            "grads/"),
        {.view = "precision", .point = 6, .evidence = "grads/"}};
  int64_t tensors = 0, checked = 0, failing = 0;
  double most = 0;
  for (const StepResult& a : x.steps) {
    if (!a.checked) continue;
    ++checked;
    const TensorError* bad = nullptr;
    for (const TensorError& e : a.grads) {
      if (e.nonzero == 0) continue;
      ++tensors;
      most = std::max(most, static_cast<double>(e.sixteen) / static_cast<double>(e.nonzero));
      if (sixteen_bit_values(e) && bad == nullptr) bad = &e;
    }
    if (bad == nullptr) continue;
    ++failing;
    if (r.second.found) continue;
    r.second = {.view = "precision",
                .point = 6,
                .found = true,
                .step = a.step,
                .phase = "grad",
                .tensor = bad->tensor,
                .ranks = bad->ranks,
                .detail = fmt::format("step {}: {} of the {} nonzero values of {}'s gradient are bf16 numbers; the "
                                      "contract declares it computed in fp32",
                                      a.step, bad->sixteen, bad->nonzero, bad->tensor),
                .evidence = recording_step_file(kGradsDir, a.step, bad->ranks.empty() ? 0 : bad->ranks.front()),
                .ratio = std::numeric_limits<double>::infinity(),
                .pattern = "rounded to bf16 on its way: a bf16 all-reduce or compress hook, a bf16 gradient buffer"};
  }
  if (r.second.found) r.second.steps_failing = failing;
  r.first.passed = !r.second.found;
  r.first.required = tensors > 0;  // nothing counted (bf16 parameters, no step checked): information only
  r.first.measured = checked == 0   ? std::string("no step checked")
                     : tensors == 0 ? fmt::format(
                                          "{} steps: the declared precision computes no gradient in fp32 "
                                          "(nothing to count)",
                                          checked)
                                    : fmt::format(
                                          "{} steps, {} fp32 gradients: at most {} of a tensor's nonzero "
                                          "values are bf16 numbers",
                                          checked, tensors, pct(most));
  r.first.detail = r.second.detail;
  return r;
}

}  // namespace sp::judge::criterion

namespace sp::judge::criterion {
namespace {

// GradScaler's rule as the engine's loss scaler computes it: from the scale and growth tracker a step ran with and
// its overflow, the two after scaler.update(). optim::LossScaler at hysteresis 1 with window = growth_interval,
// restored at iter = tracker with no overflow yet, doubles the scale after `window` clean steps in a row and halves
// it on an overflow: GradScaler's rule with growth 2 and backoff 1/2 (docs/judge.md §"fp16 with a GradScaler").
std::pair<double, int64_t> scaler_rule(const GradScalerSpec& g, const ScalerRecord& s) {
  optim::LossScaler rule(optim::LossScalerConfig{.initial_scale_power = 0,
                                                 .window = g.growth_interval,
                                                 .hysteresis = 1,
                                                 .min_scale = std::ldexp(1.0, -1000),  // GradScaler has no floor
                                                 .raise_at_min_scale = false});
  rule.restore(optim::LossScalerState{.scale = s.scale, .iter = s.tracker, .last_overflow_iter = -1, .hysteresis = 1});
  (void)rule.update(s.found_inf);
  const double next = rule.scale();
  return {next, s.found_inf || next > s.scale ? 0 : s.tracker + 1};
}

}  // namespace

bool has_grad_scaler(const RecordingContract& c) { return c.grad_scaler.has_value(); }

Row scaler(const JudgeContext& x) {
  const Recording& rec = *x.recording;
  const RecordingContract& c = rec.contract();
  Row r{row("scaler: GradScaler's skips and scales follow its rule",
            "every rank records one scaler; found_inf ⇔ a recorded gradient holds NaN or Inf; the scale and growth "
            "tracker after each step are the engine's loss scaler's (hysteresis 1, window growth_interval) from the "
            "step's; each step starts where the last ended, step 0 at init_scale",
            "records/, grads/"),
        {.view = "scaler", .point = 8, .evidence = "records/"}};
  const GradScalerSpec& g = *c.grad_scaler;
  int64_t skipped = 0, grown = 0, compared = 0;
  std::set<int64_t> failing;
  const auto found = [&](int64_t s, int rank, std::string detail, std::string pattern) {
    failing.insert(s);
    if (r.second.found) return;
    r.second = {.view = "scaler",
                .point = 8,
                .found = true,
                .step = s,
                .phase = "scaler",
                .tensor = "loss_scale",
                .ranks = {rank},
                .detail = std::move(detail),
                .evidence = rank_records(rank),
                .ratio = std::numeric_limits<double>::infinity(),
                .pattern = std::move(pattern)};
  };
  const auto& steps0 = rec.ranks()[0].steps;
  for (int64_t s = 0; s < c.steps; ++s) {
    const ScalerRecord& a = *steps0[static_cast<size_t>(s)].scaler;
    for (int rank = 1; rank < c.world; ++rank) {
      const ScalerRecord& b = *rec.ranks()[static_cast<size_t>(rank)].steps[static_cast<size_t>(s)].scaler;
      if (b.scale != a.scale || b.tracker != a.tracker || b.found_inf != a.found_inf || b.next_scale != a.next_scale ||
          b.next_tracker != a.next_tracker)
        found(s, rank,
              fmt::format("step {}: rank {} recorded scale {:g}, found_inf {}, next {:g}; rank 0 {:g}, {}, {:g}", s,
                          rank, b.scale, b.found_inf, b.next_scale, a.scale, a.found_inf, a.next_scale),
              "the ranks' scalers decided apart: found_inf not shared (a sharded model needs ShardedGradScaler)");
    }
    const double want_scale = s == 0 ? g.init_scale : steps0[static_cast<size_t>(s - 1)].scaler->next_scale;
    const int64_t want_tracker = s == 0 ? 0 : steps0[static_cast<size_t>(s - 1)].scaler->next_tracker;
    if (a.scale != want_scale || a.tracker != want_tracker)
      found(s, 0,
            fmt::format("step {} ran with scale {:g} and growth tracker {}; {} {:g} and tracker {}", s, a.scale,
                        a.tracker, s == 0 ? "the declared start is init_scale" : "the step before ended with scale",
                        want_scale, want_tracker),
            s == 0 ? "the scaler did not start from its declared init_scale"
                   : "the scaler's state changed between steps (a resume that did not load it, a second scaler)");
    const StepResult* judged = static_cast<size_t>(s) < x.steps.size() ? &x.steps[static_cast<size_t>(s)] : nullptr;
    if (judged != nullptr && judged->checked) {
      ++compared;
      int64_t nonfinite = 0;
      std::string where;
      for (const TensorError& e : judged->grads)
        if (e.nonfinite > 0 && where.empty())
          nonfinite += e.nonfinite, where = e.tensor;
        else
          nonfinite += e.nonfinite;
      if (a.found_inf != (nonfinite > 0))
        found(s, 0,
              a.found_inf ? fmt::format("step {}: found_inf, but every recorded gradient is finite", s)
                          : fmt::format("step {}: {} NaN or infinite gradient values ({} first), found_inf false", s,
                                        nonfinite, where),
              a.found_inf ? "the scaler saw other gradients than the optimizer (unscale_ of another optimizer?)"
                          : "the gradients overflowed after the scaler's check: the step was not skipped");
    }
    if (a.tracker >= g.growth_interval)
      found(s, 0, fmt::format("step {}: growth tracker {} ≥ growth_interval {}", s, a.tracker, g.growth_interval),
            "the tracker cannot reach the interval: its state was edited or restored from another scaler");
    const auto [next, tracker] = scaler_rule(g, a);
    if (a.next_scale != next || a.next_tracker != tracker)
      found(s, 0,
            fmt::format("step {}: after the step the scale is {:g} and the tracker {}; GradScaler's rule from scale "
                        "{:g}, tracker {}, found_inf {} gives {:g} and {}",
                        s, a.next_scale, a.next_tracker, a.scale, a.tracker, a.found_inf, next, tracker),
            a.next_scale == a.scale && a.next_tracker == a.tracker ? "scaler.update() was not called"
                                                                   : "the scale moved against the rule");
    skipped += a.found_inf ? 1 : 0;
    grown += a.next_scale > a.scale ? 1 : 0;
  }
  if (r.second.found) r.second.steps_failing = static_cast<int64_t>(failing.size());
  r.first.passed = !r.second.found;
  r.first.measured = fmt::format(
      "{} steps × {} ranks: {} skipped (overflow), {} growths; scale {:g} → {:g}; found_inf against the gradients at "
      "{} steps",
      c.steps, c.world, skipped, grown, steps0.front().scaler->scale, steps0.back().scaler->next_scale, compared);
  r.first.detail = r.second.detail;
  return r;
}

}  // namespace sp::judge::criterion

namespace sp::judge::criterion {

bool has_probe(const RecordingContract& c) { return !c.probe.empty(); }

Row rounding(const JudgeContext& x) {
  const RecordingContract& c = x.recording->contract();
  Row r{row("rounding: bf16 outputs are roundings of their inputs' products",
            "at every step each recorded output of layer 0's q_proj (micro-batch 0) is a bf16 rounding of the exact "
            "sum of its bf16 input × weight products within fp32's worst-case summation error, and no more of them "
            "are one ulp from the nearest rounding than an fp32 sum's roundings make (by chance ≤ 2^-20; "
            "docs/equivalence.md §8)",
            "probe/, state/"),
        {.view = "precision", .point = 6, .evidence = "probe/"}};
  int64_t probed = 0, elements = 0, flips = 0, boundary = 0, wrong = 0, failing = 0;
  double expected = 0;
  for (const StepResult& a : x.steps) {
    if (!a.checked || !a.probe.recorded) continue;
    const ProbeCheck& p = a.probe;
    ++probed, elements += p.elements, flips += p.flips, boundary += p.boundary, wrong += p.wrong;
    expected += p.expected;
    const bool too_many = static_cast<double>(p.flips) > p.threshold;
    if (p.wrong == 0 && !too_many) continue;
    ++failing;
    if (r.second.found) continue;
    r.second = {
        .view = "precision",
        .point = 6,
        .found = true,
        .step = a.step,
        .phase = "forward",
        .tensor = c.probe,
        .ranks = {p.rank},
        .detail = p.wrong > 0 ? fmt::format("step {}: {} of {} outputs of {} are no bf16 rounding of their inputs' "
                                            "product; first: {}",
                                            a.step, p.wrong, p.elements, c.probe, p.first_wrong)
                              : fmt::format("step {}: {} of {} outputs of {} are one bf16 ulp from the rounding of "
                                            "the exact sum; an fp32 sum's roundings make {:.2f} on average, more "
                                            "than {:.1f} with probability ≤ 2^-20",
                                            a.step, p.flips, p.elements, c.probe, p.expected, p.threshold),
        .evidence = recording_step_file(kProbeDir, a.step, p.rank),
        .ratio = std::numeric_limits<double>::infinity(),
        .pattern = p.wrong > 0 ? "a cast that does not round to nearest (truncation), a 16-bit sum, or other inputs "
                                 "than the recorded input and the replayed weight"
                               : "more roundings than an fp32 sum makes: a 16-bit partial sum, or casts off by one "
                                 "ulp at random"};
  }
  if (r.second.found) r.second.steps_failing = failing;
  r.first.passed = !r.second.found;
  r.first.required = probed > 0;  // no step probed: information only, said
  const double k = static_cast<double>(c.model.model.dim);
  r.first.measured = probed == 0
                         ? std::string("no step probed (no probe file, or no step checked)")
                         : fmt::format(
                               "{} steps × {} outputs: {} one ulp from the nearest rounding ({:.2g} of them; the fp32 "
                               "summation model expects {:.1f}, √K·2^-16 = {:.2g}), {} next to a boundary, {} wrong",
                               probed, elements / probed, flips,
                               static_cast<double>(flips) / static_cast<double>(std::max<int64_t>(elements, 1)),
                               expected, std::sqrt(k) / 65536.0, boundary, wrong);
  r.first.detail = r.second.detail;
  return r;
}

}  // namespace sp::judge::criterion
