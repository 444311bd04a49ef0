// The patterns of judge/diagnosis.h, each a test that can fail.
#include "judge/diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "kernels/clip.h"

namespace sp::judge {
namespace {

std::string num(double x) { return fmt::format("{:.6g}", x); }

bool is_qk(const std::string& t) {
  return t.find("self_attn.q_proj") != std::string::npos || t.find("self_attn.k_proj") != std::string::npos;
}

}  // namespace

std::vector<UpdateHypothesis> update_hypotheses(const Recording& rec, int64_t step, const std::string& tensor,
                                                const UpdateInputs& base) {
  const RecordingContract& c = rec.contract();
  std::vector<UpdateHypothesis> out;
  const auto add = [&](std::string says, auto&& change) {
    UpdateInputs in = base;
    change(in);
    out.push_back({std::move(says), std::move(in)});
  };
  add("the optimizer did not step (parameters and moments unchanged)", [](UpdateInputs& in) { in.no_step = true; });
  // The lr: the one the optimizer's groups held, the recorded lr of another step (a schedule shifted or restarted),
  // or a simple multiple.
  std::set<double> lrs;
  for (const RankRecords& rr : rec.ranks())
    if (rr.steps[static_cast<size_t>(step)].has_group_lr)
      for (double lr : rr.steps[static_cast<size_t>(step)].group_lr)
        if (lr != base.lr) lrs.insert(lr);
  for (double lr : lrs)
    add(fmt::format("the optimizer stepped with the lr its groups held, {} ({} × the recorded {})", num(lr),
                    num(lr / base.lr), num(base.lr)),
        [lr](UpdateInputs& in) { in.lr = lr; });
  for (int64_t o = 0; o < c.steps; ++o) {
    const double lr = rec.ranks()[0].steps[static_cast<size_t>(o)].lr;
    if (o == step || lr == base.lr || lrs.contains(lr) || !std::isfinite(lr)) continue;
    lrs.insert(lr);
    add(fmt::format("the optimizer stepped with step {}'s lr {} (the schedule {} by {} steps)", o, num(lr),
                    o < step ? "restarted or behind" : "ahead", std::abs(step - o)),
        [lr](UpdateInputs& in) { in.lr = lr; });
  }
  const double dp = c.strategy.dp, tp = c.strategy.tp, m = static_cast<double>(c.micro_batches);
  for (double k : {10.0, 0.1, 2.0, 0.5, 100.0, 0.01, dp, 1 / dp, tp, 1 / tp, m, 1 / m}) {
    if (k == 1 || lrs.contains(base.lr * k)) continue;
    lrs.insert(base.lr * k);
    add(fmt::format("the update fits lr × {} ({} instead of the recorded {}): the lr is off", num(k), num(base.lr * k),
                    num(base.lr)),
        [&](UpdateInputs& in) { in.lr = base.lr * k; });
  }
  // The gradient changed after it was recorded: × k before the clip (its norm recorded from the scaled
  // gradient) or after it.
  std::set<float> ks;
  for (double k : {2.0, 3.0, 4.0, 0.5, 1 / 3.0, 0.25, dp, 1 / dp, tp, 1 / tp, m, 1 / m, 10.0, 0.1}) {
    const auto f = static_cast<float>(k);
    if (f == 1.0f || !ks.insert(f).second) continue;
    add(fmt::format("the optimizer stepped with the recorded gradient × {} (changed after rec.gradients(): scaled, "
                    "a loss scale not undone)",
                    num(f)),
        [f](UpdateInputs& in) { in.grad_scale_after = f; });
    add(fmt::format("the optimizer stepped with the recorded gradient × {}, scaled before the clip", num(f)),
        [f](UpdateInputs& in) { in.grad_scale = f; });
  }
  // The clip: none, or another rank's coefficient.
  if (std::any_of(base.pieces.begin(), base.pieces.end(), [](auto& p) { return p.second != 1.0f; }))
    add("the gradient was not clipped (coefficient 1)", [](UpdateInputs& in) {
      for (auto& p : in.pieces) p.second = 1.0f;
    });
  std::set<float> coefs;
  for (int rank = 0; rank < c.world; ++rank) {
    const std::optional<double> n = rec.ranks()[static_cast<size_t>(rank)].steps[static_cast<size_t>(step)].grad_norm;
    if (!n || !(c.max_grad_norm > 0)) continue;
    const float coef = kernels::clip_coefficient(*n, c.max_grad_norm);
    if (!coefs.insert(coef).second) continue;
    add(fmt::format("clipped with rank {}'s coefficient {} (its norm {})", rank, num(coef), num(*n)),
        [coef](UpdateInputs& in) {
          for (auto& p : in.pieces) p.second = coef;
        });
  }
  // Weight decay against the declaration.
  if (c.weight_decay > 0)
    add(c.decays(tensor) ? "not decayed, although the declaration decays it (optimizer.no_decay lacks it)"
                         : "decayed, although the declaration lists it in optimizer.no_decay",
        [&](UpdateInputs& in) { in.weight_decay = c.decays(tensor) ? 0.0 : c.weight_decay; });
  for (int64_t d : {int64_t{-1}, int64_t{1}})
    add(fmt::format("AdamW's step count was {} by one (its bias corrections of step t{}1)", d > 0 ? "ahead" : "behind",
                    d > 0 ? "+" : "-"),
        [d](UpdateInputs& in) { in.t_delta = d; });
  return out;
}

std::string gradient_pattern(const Recording& rec, const StepResult& r, const AnchorState& recorded,
                             const ReferenceStep& ref, const AnchorState* prev, float prev_coefficient) {
  std::vector<const TensorError*> bad;
  for (const TensorError& e : r.grads)
    if (!(e.rel <= r.tol.grad)) bad.push_back(&e);
  if (bad.empty()) return {};
  for (const TensorError* e : bad)
    if (e->nonfinite > 0)
      return fmt::format("{} holds {} NaN or infinite values: the run diverged (or a non-finite value was fed in)",
                         e->tensor, e->nonfinite);
  // Every tensor k × the engine's: the projection k = <g, ref>/<ref, ref> is one number for all, and what is
  // left is within the tolerance.
  std::vector<double> ks;
  bool scaled = true;
  for (const model::WeightSpec& w : rec.weights()) {
    const std::vector<float>& g = recorded.tensors.at(w.name).grad;
    const std::vector<float>& f = ref.grads.at(w.name);
    double gf = 0, ff = 0;
    for (size_t i = 0; i < g.size(); ++i)
      gf += static_cast<double>(g[i]) * f[i], ff += static_cast<double>(f[i]) * f[i];
    if (ff == 0) continue;
    const double k = gf / ff;
    double d = 0;
    for (size_t i = 0; i < g.size(); ++i) d += (g[i] - k * f[i]) * (g[i] - k * f[i]);
    scaled = scaled && std::sqrt(d / ff) / std::abs(k) <= r.tol.grad;
    ks.push_back(k);
  }
  if (scaled && !ks.empty()) {
    const auto [lo, hi] = std::minmax_element(ks.begin(), ks.end());
    if (*hi - *lo <= 1e-3 * std::abs(*hi) && std::abs(*hi - 1) > 1e-3)
      return fmt::format("every tensor's gradient is {} × the engine's: the loss (or its gradient) scaled by {}",
                         num(ks.front()), num(ks.front()));
  }
  if (std::all_of(bad.begin(), bad.end(), [](const TensorError* e) { return is_qk(e->tensor); }))
    return fmt::format(
        "only q/k projections' gradients differ ({} of {} tensors): the rotary embedding's layout "
        "(interleaved pairs against Hugging Face's rotate-half) or its angles",
        bad.size(), r.grads.size());
  // q/k far further off than anything else: the same cause, whose effect on the scores moves the rest a little.
  double qk = std::numeric_limits<double>::infinity(), rest = 0;
  for (const TensorError& e : r.grads) {
    if (is_qk(e.tensor))
      qk = std::min(qk, e.rel);
    else
      rest = std::max(rest, e.rel);
  }
  if (std::isfinite(qk) && qk > 10 * rest)
    return fmt::format(
        "q/k projections' gradients are {:.0f}× further off than any other tensor's: the rotary embedding's layout "
        "(interleaved pairs against Hugging Face's rotate-half) or its angles",
        qk / rest);
  // Not zeroed: the previous step's gradient as the optimizer left it (clipped in place, or not) plus this step's.
  if (prev != nullptr)
    for (const float scale : {prev_coefficient, 1.0f}) {
      bool sum = true;
      for (const model::WeightSpec& w : rec.weights()) {
        const std::vector<float>& g = recorded.tensors.at(w.name).grad;
        const std::vector<float>& before = prev->tensors.at(w.name).grad;
        const std::vector<float>& f = ref.grads.at(w.name);
        std::vector<float> want(f.size());
        for (size_t i = 0; i < f.size(); ++i) want[i] = before[i] * scale + f[i];
        sum = sum && relative_distance(g.data(), want.data(), want.size()).first <= 2 * r.tol.grad;
        if (!sum) break;
      }
      if (sum)
        return fmt::format(
            "each gradient is step {}'s{} plus this step's: gradients were not zeroed between the "
            "steps",
            r.step - 1, scale != 1.0f ? fmt::format(" (as clipped, × {})", num(scale)) : "");
    }
  return {};
}

std::string norm_pattern(const Recording& rec, const Assembly& as, int64_t step, int rank, double recorded,
                         double tolerance) {
  // The norm of this rank's own pieces (a whole tensor counts whole, a shard its piece): what clip_grad_norm_
  // returns when its all-reduce over tp (or pp) is missing.
  const auto it = as.piece_squares.find(step);
  if (it == as.piece_squares.end()) return {};
  double sq = 0;
  for (const auto& [key, value] : it->second)
    if (key.second == rank) sq += value;
  const double local = std::sqrt(sq);
  if (std::abs(recorded - local) <= tolerance * std::max(local, 1e-30))
    return fmt::format(
        "rank {}'s norm {} is the norm of its own pieces only: clipped before the reduction over "
        "the group{} that shard{} its tensors",
        rank, num(local), rec.contract().strategy.zero >= 2 ? "s (dp under ZeRO-2/3, tp, pp)" : " (tp or pp)",
        rec.contract().strategy.zero >= 2 ? "" : "s");
  return {};
}

}  // namespace sp::judge
