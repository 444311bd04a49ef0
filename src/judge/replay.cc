// The every-step judgement and the anchored one (judge/replay.h).
#include "judge/replay.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "judge/diagnosis.h"
#include "kernels/adamw.h"
#include "kernels/clip.h"

namespace sp::judge {
namespace {

const StepRecord& step_of(const Recording& rec, int rank, int64_t step) {
  return rec.ranks()[static_cast<size_t>(rank)].steps[static_cast<size_t>(step)];
}

// The clip coefficient rank `rank` applied at `step` (torch's formula on its recorded norm; 1 when clipping is
// off or no norm was recorded: the norm view says so).
float coefficient_of(const Recording& rec, int rank, int64_t step) {
  const RecordingContract& c = rec.contract();
  const std::optional<double> n = step_of(rec, rank, step).grad_norm;
  return c.max_grad_norm > 0 && n ? kernels::clip_coefficient(*n, c.max_grad_norm) : 1.0f;
}

evidence::TensorSummary summary_of(const std::vector<float>& x) {
  evidence::TensorSummary s;
  s.add_contiguous(x.data(), static_cast<int64_t>(x.size()), 0);
  return s;
}

bool same_record(const AssembledTensor* recorded, const evidence::TensorSummary& s) {
  return recorded != nullptr && recorded->summary.to_json() == s.to_json();
}

ReplayState state_from(const AnchorState& a, std::map<std::string, std::vector<int>>& owners) {
  ReplayState out;
  for (auto& [name, t] : a.tensors) {
    out[name] = ReplayTensor{.p = t.param, .m = t.exp_avg, .v = t.exp_avg_sq, .t = t.optimizer_step};
    owners[name] = t.moment_ranks;
  }
  return out;
}

// The replayed state against a recorded one (a resume's): every tensor's parameters, moments and step count.
std::vector<std::string> state_mismatches(const ReplayState& replayed, const ReplayState& loaded) {
  std::vector<std::string> out;
  for (const auto& [name, want] : replayed) {
    const ReplayTensor& got = loaded.at(name);
    for (const auto& [kind, a, b] : {std::tuple{"param", &want.p, &got.p}, std::tuple{"exp_avg", &want.m, &got.m},
                                     std::tuple{"exp_avg_sq", &want.v, &got.v}})
      if (*a != *b || std::memcmp(a->data(), b->data(), a->size() * sizeof(float)) != 0)
        out.push_back(fmt::format("{} of {}", kind, name));
    if (want.t != got.t)
      out.push_back(fmt::format("the step count of {} ({} loaded, {} replayed)", name, got.t, want.t));
  }
  return out;
}

// The update inputs of tensor w at step s: the recorded lr (rank 0's), the declared hyperparameters and
// arithmetic, each gradient piece with the clip coefficient of the rank that wrote it.
UpdateInputs inputs_of(const Recording& rec, int64_t s, const std::string& name, const AnchorTensor& g) {
  const RecordingContract& c = rec.contract();
  UpdateInputs in{.lr = step_of(rec, 0, s).lr,
                  .beta1 = c.beta1,
                  .beta2 = c.beta2,
                  .eps = c.eps,
                  .weight_decay = c.decays(name) ? c.weight_decay : 0.0,
                  .arithmetic = c.arithmetic};
  for (const auto& [shard, rank] : g.grad_pieces) in.pieces.push_back({shard, coefficient_of(rec, rank, s)});
  return in;
}

// The skipped-backward pattern: the recorded gradient equals (N − n_i)/N × the engine's gradient of the batch
// without micro-batch i, for one i (its loss was recorded; its gradient is not in the sum).
Result<std::string> missing_micro_batch(const Recording& rec, int64_t s, const ParamsFn& params,
                                        const ReferenceFn& reference, const AnchorState& recorded,
                                        const StepResult& r) {
  int64_t total = 0;
  for (const auto& [l, rank] : rec.losses(s)) total += l.targets;
  for (const auto& [l, rank] : rec.losses(s)) {
    if (l.targets == 0 || l.targets == total) continue;
    SP_ASSIGN_OR_RETURN(const ReferenceStep without, reference(s, params, l.index));
    const double scale = static_cast<double>(total - l.targets) / static_cast<double>(total);
    bool fits = true;
    for (const model::WeightSpec& w : rec.weights()) {
      const std::vector<float>& want = without.grads.at(w.name);
      std::vector<float> scaled(want.size());
      for (size_t i = 0; i < want.size(); ++i) scaled[i] = static_cast<float>(want[i] * scale);
      const auto [rel, same] = relative_distance(recorded.tensors.at(w.name).grad.data(), scaled.data(), want.size());
      fits = fits && rel <= r.tol.grad;
      if (!fits) break;
    }
    if (fits)
      return fmt::format(
          "the recorded gradient is the engine's without micro-batch {} ({} targets): its loss was recorded, its "
          "backward is missing from the sum",
          l.index, l.targets);
  }
  return std::string();
}

}  // namespace

std::pair<double, bool> relative_distance(const float* a, const float* b, size_t n) {
  double d = 0, norm = 0;
  bool same = true;
  for (size_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    d += (x - y) * (x - y);
    norm += y * y;
    same = same && std::memcmp(&a[i], &b[i], sizeof(float)) == 0;
  }
  if (same) return {0.0, true};
  if (!std::isfinite(d)) return {std::numeric_limits<double>::infinity(), false};
  if (d == 0) return {0.0, false};
  return {norm == 0 ? std::numeric_limits<double>::infinity() : std::sqrt(d / norm), false};
}

bool replay_update(ReplayTensor& x, const std::vector<float>& g, const Shape& shape, const UpdateInputs& in,
                   std::string* why) {
  if (in.no_step) return true;
  if (x.t + 1 + in.t_delta < 1) return false;  // a step count below 1 is no AdamW step
  const int64_t n = static_cast<int64_t>(g.size());
  std::vector<float> scaled;
  const float* grad = g.data();
  if (in.grad_scale != 1.0f) {  // × k before the clip: (g·k)·coef
    scaled.resize(g.size());
    for (size_t i = 0; i < g.size(); ++i) scaled[i] = g[i] * in.grad_scale;
    grad = scaled.data();
  }
  kernels::AdamWStep h{.lr = in.lr,
                       .beta1 = in.beta1,
                       .beta2 = in.beta2,
                       .eps = in.eps,
                       .weight_decay = in.weight_decay,
                       .t = x.t + 1 + in.t_delta,
                       .arithmetic = in.arithmetic};
  // × k after the clip: (g·coef)·k, the coefficient applied first into a buffer.
  const auto run = [&](int64_t at, int64_t count, float coef) {
    // The recorded roots of [at, at + count), relative to `at`.
    std::vector<kernels::SqrtValue> roots;
    const auto first = std::lower_bound(in.roots.begin(), in.roots.end(), at,
                                        [](const kernels::SqrtValue& r, int64_t i) { return r.index < i; });
    for (auto it = first; it != in.roots.end() && it->index < at + count; ++it)
      roots.push_back({it->index - at, it->value});
    h.sqrt_values = roots;
    if (in.grad_scale_after != 1.0f) {
      std::vector<float> b(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) b[static_cast<size_t>(i)] = grad[at + i] * coef;
      h.grad_scale = in.grad_scale_after;
      kernels::adamw_update(x.p.data() + at, x.m.data() + at, x.v.data() + at, f32_view(b.data(), count), h);
      return;
    }
    h.grad_scale = coef;
    kernels::adamw_update(x.p.data() + at, x.m.data() + at, x.v.data() + at, f32_view(grad + at, count), h);
  };
  bool uniform = true;
  for (const auto& [shard, coef] : in.pieces) uniform = uniform && coef == in.pieces.front().second;
  if (uniform || in.pieces.size() < 2) {
    run(0, n, in.pieces.empty() ? 1.0f : in.pieces.front().second);
  } else {
    // Each piece with its own rank's coefficient, run by contiguous run of its logical elements (judge/shard.h).
    for (const auto& [shard, coef] : in.pieces) {
      if (!shard) {
        run(0, n, coef);
        continue;
      }
      const float c = coef;
      shard->for_each_run(shape, [&](int64_t logical, int64_t, int64_t count) { run(logical, count, c); });
    }
  }
  x.t = h.t;
  // A recorded root may only be the run's rounding of the same square root: within 1 ulp of the correct one.
  for (const kernels::SqrtValue& r : in.roots) {
    const float exact = std::sqrt(x.v[static_cast<size_t>(r.index)]);
    const int64_t ulps = std::abs(static_cast<int64_t>(std::bit_cast<int32_t>(exact)) -
                                  static_cast<int64_t>(std::bit_cast<int32_t>(r.value)));
    if (ulps > 1) {
      if (why != nullptr)
        *why = fmt::format("element {}'s recorded square root {} is {} ulp from the correctly rounded {}", r.index,
                           r.value, ulps, exact);
      return false;
    }
  }
  return true;
}

void compare_gradients(const Recording& rec, const Assembly& as, const AnchorState& a, const ReferenceStep& ref,
                       StepResult& out) {
  const RecordingContract& c = rec.contract();
  out.loss_run = as.loss.at(a.step);
  out.loss_ref = ref.loss;
  out.loss_rel = std::abs(out.loss_run - out.loss_ref) / std::max(std::abs(out.loss_ref), 1e-30);
  if (!std::isfinite(out.loss_run)) out.loss_rel = std::numeric_limits<double>::infinity();
  for (const auto& [l, rank] : rec.losses(a.step)) {
    const auto i = static_cast<size_t>(l.index);
    if (i >= ref.micro_batch_losses.size()) continue;
    const double want = ref.micro_batch_losses[i];
    double rel = std::abs(l.loss_sum - want) / std::max(std::abs(want), 1e-30);
    if (!std::isfinite(l.loss_sum)) rel = std::numeric_limits<double>::infinity();
    if (out.worst_micro_batch < 0 || rel > out.worst_micro_batch_rel)
      out.worst_micro_batch = l.index, out.worst_micro_batch_rel = rel, out.worst_micro_batch_rank = rank;
  }
  for (const model::WeightSpec& w : rec.weights()) {
    const AnchorTensor& t = a.tensors.at(w.name);
    const std::vector<float>& want = ref.grads.at(w.name);
    auto [rel, same] = relative_distance(t.grad.data(), want.data(), want.size());
    TensorError e{.tensor = w.name, .rel = rel, .bitwise = same};
    for (float x : t.grad) e.nonfinite += std::isfinite(x) ? 0 : 1;
    if (gradient_in_fp32(c, w.name))
      for (float x : t.grad) {
        if (x == 0 || !std::isfinite(x)) continue;
        ++e.nonzero;
        e.sixteen += (std::bit_cast<uint32_t>(x) & 0xFFFFu) == 0 ? 1 : 0;
      }
    for (const auto& [shard, rank] : t.grad_pieces)
      if (std::find(e.ranks.begin(), e.ranks.end(), rank) == e.ranks.end()) e.ranks.push_back(rank);
    out.grads.push_back(std::move(e));
    // The recorded values must be the ones the checksums describe (the same recorder, the same moment).
    if (c.checksums_at(a.step)) {
      const evidence::TensorSummary s = summary_of(t.grad);
      const AssembledTensor* recorded = as.find(a.step, "grad", w.name);
      if (!same_record(recorded, s))
        out.disagreements.push_back(
            fmt::format("step {} grad {}: the recorded values digest to {}, the checksums "
                        "record {}",
                        a.step, w.name, s.digest().hex(), recorded ? recorded->summary.digest().hex() : "nothing"));
    }
  }
}

StepJudge::StepJudge(const Recording& rec, ReferenceFn reference) : rec_(rec), reference_(std::move(reference)) {}

bool StepJudge::state_recorded(int64_t s) const {
  for (int rank = 0; rank < rec_.contract().world; ++rank)
    if (rec_.present(rec_.state_file(s, rank))) return true;
  return false;
}

Status StepJudge::step(const Assembly& as, int64_t s, StepResult& r) {
  const Recording& rec = rec_;
  const RecordingContract& c = rec.contract();
  r = StepResult{.step = s, .tol = foreign_tolerances(c, as.targets.at(s))};
  if (state_recorded(s)) {
    SP_ASSIGN_OR_RETURN(const AnchorState st, read_state(rec, s));
    r.bytes += st.bytes, r.files += st.files;
    ReplayState loaded = state_from(st, owners_);
    if (known_) r.resume_mismatch = state_mismatches(state_, loaded);
    state_ = std::move(loaded);
    known_ = true, lost_.clear();
    prev_.reset();
  }
  if (!known_) {
    r.unchecked = lost_.empty() ? fmt::format("no recorded state before step {}", s) : lost_;
    return Status();
  }
  SP_ASSIGN_OR_RETURN(AnchorState g, read_grads(rec, s));
  r.bytes += g.bytes, r.files += g.files;
  const ParamsFn params = [&](const std::string& name) -> const float* {
    auto it = state_.find(name);
    return it == state_.end() ? nullptr : it->second.p.data();
  };
  SP_ASSIGN_OR_RETURN(const ReferenceStep ref, reference_(s, params, -1));
  compare_gradients(rec, as, g, ref, r);
  r.coefficient = coefficient_of(rec, 0, s);
  r.overflow = scaler_skipped(rec, s);
  if (!r.overflow &&
      std::any_of(r.grads.begin(), r.grads.end(), [&](const TensorError& e) { return !(e.rel <= r.tol.grad); })) {
    r.grad_pattern = gradient_pattern(rec, r, g, ref, prev_ ? &*prev_ : nullptr, prev_coefficient_);
    if (r.grad_pattern.empty()) {
      SP_ASSIGN_OR_RETURN(r.grad_pattern, missing_micro_batch(rec, s, params, reference_, g, r));
    }
  }
  if (!c.probe.empty()) {  // the probed module's weight before the step: the replay's, bit for bit the run's
    SP_ASSIGN_OR_RETURN(r.probe, check_probe(rec, s, state_.at(c.probe + ".weight").p));
  }
  // The update, tensor by tensor, against the recorded parameter checksums; a mismatch is tested against the
  // hypotheses, and the first that reproduces the recorded bits is what the run did.
  std::map<std::string, std::vector<std::string>> explained;  // says → tensors
  std::vector<std::string> unexplained;
  RootValues roots;
  if (c.sqrt_recorded) {
    SP_ASSIGN_OR_RETURN(roots, read_sqrt(rec, s));
  }
  for (const model::WeightSpec& w : rec.weights()) {
    const AnchorTensor& gt = g.tensors.at(w.name);
    UpdateInputs base = inputs_of(rec, s, w.name, gt);
    base.no_step = r.overflow;  // GradScaler's skip: the recorded parameters are the ones before the step
    if (const auto it = roots.find(w.name); it != roots.end()) base.roots = it->second;
    ReplayTensor next = state_.at(w.name);
    std::string bad_root;
    const bool rooted = replay_update(next, gt.grad, w.shape, base, &bad_root);
    const AssembledTensor* recorded = as.find(s, "param", w.name);
    const evidence::TensorSummary got = summary_of(next.p);
    TensorError e{.tensor = w.name, .bitwise = rooted && same_record(recorded, got), .ranks = owners_[w.name]};
    if (!rooted) {
      explained["a recorded square root is no rounding of the replayed one (" + bad_root + ")"].push_back(w.name);
      unexplained.push_back(w.name);
    }
    for (int rank : gt.grad_pieces.empty() ? std::vector<int>{} : std::vector<int>{gt.grad_pieces[0].second})
      if (std::find(e.ranks.begin(), e.ranks.end(), rank) == e.ranks.end()) e.ranks.push_back(rank);
    if (!e.bitwise && recorded != nullptr && rooted) {
      const double a = recorded->summary.stats.l2_norm(), b = got.stats.l2_norm();
      e.rel = std::max(std::abs(a - b) / std::max(b, 1e-30), std::numeric_limits<double>::min());
      if (!recorded->summary.stats.finite()) e.rel = std::numeric_limits<double>::infinity();
      bool fits = false;
      for (const UpdateHypothesis& h : update_hypotheses(rec, s, w.name, base)) {
        ReplayTensor alt = state_.at(w.name);
        if (!replay_update(alt, gt.grad, w.shape, h.in)) continue;
        if (same_record(recorded, summary_of(alt.p))) {
          explained[h.says].push_back(w.name);
          next = std::move(alt);
          fits = true;
          break;
        }
      }
      if (!fits) unexplained.push_back(w.name);
    }
    r.update.push_back(std::move(e));
    state_[w.name] = std::move(next);
  }
  for (const auto& [says, tensors] : explained)
    r.update_pattern +=
        fmt::format("{}{} ({} tensor{}: {}{})", r.update_pattern.empty() ? "" : "; ", says, tensors.size(),
                    tensors.size() == 1 ? "" : "s", tensors.front(), tensors.size() > 1 ? ", ..." : "");
  if (!unexplained.empty()) {
    known_ = false;
    lost_ = fmt::format(
        "the parameters after step {} are not what any replay gives ({} and {} more): the run's "
        "state is unknown until the next recorded state",
        s, unexplained.front(), unexplained.size() - 1);
  }
  r.checked = true;
  prev_ = std::move(g);
  prev_coefficient_ = r.coefficient;
  return Status();
}

Status judge_every_step(const Recording& rec, const Assembly& as, const ReferenceFn& reference,
                        std::vector<StepResult>& out, const std::map<int64_t, StepResult>* judged) {
  StepJudge judge(rec, reference);
  for (int64_t s = 0; s < rec.contract().steps; ++s) {
    StepResult r;
    if (judged != nullptr && judged->count(s)) {
      r = judged->at(s);  // judged as it came (judge --follow); its gradients were discarded
      judge.forget(
          fmt::format("the steps up to {} were judged as they came and their gradients discarded; the "
                      "replay's state was not kept",
                      s));
    } else {
      SP_RETURN_IF_ERROR(judge.step(as, s, r));
    }
    out.push_back(std::move(r));
  }
  return Status();
}

Status judge_anchors(const Recording& rec, const Assembly& as, const ReferenceFn& reference,
                     std::vector<StepResult>& out) {
  const RecordingContract& c = rec.contract();
  for (int64_t s = 0; s < c.steps; ++s) {
    StepResult r{.step = s, .tol = foreign_tolerances(c, as.targets.at(s))};
    if (std::find(c.anchors.begin(), c.anchors.end(), s) == c.anchors.end()) {
      r.unchecked = fmt::format(
          "no anchor at step {}: a format 1 recording judges its anchors only (record with "
          "the every-step Recorder to judge every step)",
          s);
      out.push_back(std::move(r));
      continue;
    }
    SP_ASSIGN_OR_RETURN(const AnchorState a, read_anchor(rec, s));
    r.bytes = a.bytes, r.files = a.files;
    const ParamsFn params = [&](const std::string& name) -> const float* {
      auto it = a.tensors.find(name);
      return it == a.tensors.end() ? nullptr : it->second.param.data();
    };
    SP_ASSIGN_OR_RETURN(const ReferenceStep ref, reference(s, params, -1));
    compare_gradients(rec, as, a, ref, r);
    for (const model::WeightSpec& w : rec.weights()) {
      const AnchorTensor& t = a.tensors.at(w.name);
      // The engine's AdamW on the recorded state, with the lr and clip coefficient of the rank that recorded the
      // parameters after the step (format 1 is judged within 16u: its recorder's lr may not be an fp32 value).
      const int rank = t.after_ranks.empty() ? 0 : t.after_ranks.front();
      ReplayTensor x{.p = t.param, .m = t.exp_avg, .v = t.exp_avg_sq, .t = t.optimizer_step};
      UpdateInputs in{.lr = static_cast<float>(step_of(rec, rank, s).lr),
                      .beta1 = static_cast<float>(c.beta1),
                      .beta2 = static_cast<float>(c.beta2),
                      .eps = static_cast<float>(c.eps),
                      .weight_decay = c.decays(w.name) ? static_cast<float>(c.weight_decay) : 0.0f,
                      .pieces = {{std::nullopt, coefficient_of(rec, rank, s)}}};
      if (w.name == rec.weights().front().name) r.coefficient = in.pieces.front().second;
      replay_update(x, t.grad, w.shape, in);
      const auto [urel, usame] = relative_distance(t.param_after.data(), x.p.data(), x.p.size());
      std::vector<int> ranks = t.moment_ranks;
      for (int o : t.after_ranks)
        if (std::find(ranks.begin(), ranks.end(), o) == ranks.end()) ranks.push_back(o);
      r.update.push_back({.tensor = w.name, .rel = urel, .bitwise = usame, .ranks = ranks});
      if (c.checksums_at(s) && !same_record(as.find(s, "param", w.name), summary_of(t.param_after)))
        r.disagreements.push_back(
            fmt::format("step {} param {}: the anchor's values differ from the checksum record", s, w.name));
    }
    r.checked = true;
    out.push_back(std::move(r));
  }
  return Status();
}

}  // namespace sp::judge
