#include "judge/context.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/adamw.h"
#include "kernels/clip.h"

namespace sp::judge {
namespace {

constexpr double kU = 5.9604644775390625e-08;  // 2^-24

// ‖a − b‖₂ / ‖b‖₂ in double (0 when both are zero), and whether every element is equal.
std::pair<double, bool> distance(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  bool same = a.size() == b.size();
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double x = a[i], y = b[i];
    d += (x - y) * (x - y);
    n += y * y;
    same = same && std::memcmp(&a[i], &b[i], sizeof(float)) == 0;
  }
  if (d == 0) return {0.0, same};
  return {n == 0 ? std::numeric_limits<double>::infinity() : std::sqrt(d / n), same};
}

Result<plan::RunPlan> declared_plan(const RecordingContract& c) {
  config::RunConfig rc = c.single_device_config();
  plan::Strategy s = c.strategy;
  s.schedule = config::Schedule::kGpipe;
  s.reduction = config::Reduction::kFast;  // a framework's all-reduce: MPI's order, not the canonical tree
  plan::apply(s, rc);
  return plan::RunPlan::make(rc, c.world);
}

const StepRecord& step_of(const Recording& rec, int rank, int64_t step) {
  return rec.ranks()[static_cast<size_t>(rank)].steps[static_cast<size_t>(step)];
}

void compare_anchor(const Recording& rec, const Assembly& as, const AnchorState& a, const ReferenceStep& ref,
                    AnchorResult& out) {
  const RecordingContract& c = rec.contract();
  out.loss_run = as.loss.at(a.step);
  out.loss_ref = ref.loss;
  out.loss_rel = std::abs(out.loss_run - out.loss_ref) / std::max(std::abs(out.loss_ref), 1e-30);
  for (const auto& [l, rank] : rec.losses(a.step)) {
    const auto i = static_cast<size_t>(l.index);
    if (i >= ref.micro_batch_losses.size()) continue;
    const double want = ref.micro_batch_losses[i];
    const double rel = std::abs(l.loss_sum - want) / std::max(std::abs(want), 1e-30);
    if (out.worst_micro_batch < 0 || rel > out.worst_micro_batch_rel)
      out.worst_micro_batch = l.index, out.worst_micro_batch_rel = rel, out.worst_micro_batch_rank = rank;
  }
  for (const model::WeightSpec& w : rec.weights()) {
    const AnchorTensor& t = a.tensors.at(w.name);
    const auto [grel, gsame] = distance(t.grad, ref.grads.at(w.name));
    out.grads.push_back({w.name, grel, gsame, {}});
    // The engine's AdamW (kernels/adamw.h: torch.optim.AdamW semantics) on the recorded state, with the lr and
    // the clip coefficient of the rank that recorded the parameters after the step.
    const int rank = t.after_ranks.empty() ? 0 : t.after_ranks.front();
    const StepRecord& st = step_of(rec, rank, a.step);
    const double norm = st.grad_norm.value_or(0.0);
    const float coef = c.max_grad_norm > 0 ? kernels::clip_coefficient(norm, c.max_grad_norm) : 1.0f;
    if (w.name == rec.weights().front().name) out.coefficient = coef;
    std::vector<float> p = t.param, m = t.exp_avg, v = t.exp_avg_sq;
    kernels::adamw_update(
        p.data(), m.data(), v.data(), ConstBufView{t.grad.data(), static_cast<int64_t>(t.grad.size()), DType::kF32},
        static_cast<float>(st.lr), static_cast<float>(c.beta1), static_cast<float>(c.beta2), static_cast<float>(c.eps),
        w.decay ? static_cast<float>(c.weight_decay) : 0.0f, t.optimizer_step + 1, coef);
    const auto [urel, usame] = distance(t.param_after, p);
    std::vector<int> owners = t.moment_ranks;
    for (int r : t.after_ranks)
      if (std::find(owners.begin(), owners.end(), r) == owners.end()) owners.push_back(r);
    out.update.push_back({w.name, urel, usame, owners});
    // The anchor's tensors must be the ones the checksums describe (the same recorder, the same moment).
    if (c.checksums_at(a.step))
      for (const auto& [phase, values] :
           {std::pair<const char*, const std::vector<float>*>{"grad", &t.grad}, {"param", &t.param_after}}) {
        evidence::TensorSummary s;
        s.add_contiguous(values->data(), static_cast<int64_t>(values->size()), 0);
        const AssembledTensor* rec_t = as.find(a.step, phase, w.name);
        if (rec_t == nullptr || rec_t->summary.to_json() != s.to_json())
          out.disagreements.push_back(
              fmt::format("step {} {} {}: the anchor's values digest to {}, the checksums "
                          "record {}",
                          a.step, phase, w.name, s.digest().hex(), rec_t ? rec_t->summary.digest().hex() : "nothing"));
      }
  }
}

}  // namespace

JudgeTolerances foreign_tolerances(const RecordingContract& c, int64_t targets) {
  const model::LlamaConfig& m = c.model.model;
  JudgeTolerances t;
  t.reductions = 19 * m.n_layers + 6;
  t.longest = std::max({m.dim, 2 * m.ffn_dim, c.seq_len, (m.n_heads + 2 * m.n_kv_heads) * m.head_dim()});
  t.token = (std::sqrt(static_cast<double>(t.reductions * t.longest)) + static_cast<double>(c.seq_len)) * kU;
  t.loss = t.token;
  t.grad = t.token * std::sqrt(static_cast<double>(std::max<int64_t>(targets, 1)));
  t.update = 16 * kU;
  t.norm = 2 * std::sqrt(static_cast<double>(m.param_count())) * kU;
  t.semantics = 1.52587890625e-05;  // 2^-16
  return t;
}

Result<JudgeContext> JudgeContext::make(const Recording& rec, const ReferenceFn& reference) {
  JudgeContext ctx;
  ctx.recording = &rec;
  const RecordingContract& c = rec.contract();
  SP_ASSIGN_OR_RETURN(ctx.assembly, assemble_checksums(rec));
  ctx.trace = evidence::check_trace_dir(rec.dir());
  ctx.plan = declared_plan(c);
  // Every rank's clip norm against the norm of the logical gradient (exact, from the assembled checksums).
  for (int64_t s = 0; s < c.steps; ++s) {
    if (!c.checksums_at(s) || !(c.max_grad_norm > 0)) continue;
    double sq = 0;
    for (const AssembledTensor& t : ctx.assembly.tensors)
      if (t.step == s && t.phase == "grad") sq += t.summary.stats.sum_squares();
    const double global = std::sqrt(sq);
    const double tol = foreign_tolerances(c, ctx.assembly.targets.at(s)).norm;
    for (int rank = 0; rank < c.world; ++rank) {
      ++ctx.norm_checks;
      const std::optional<double> n = step_of(rec, rank, s).grad_norm;
      const double rel = n ? std::abs(*n - global) / std::max(global, 1e-30) : std::numeric_limits<double>::infinity();
      if (!(rel <= tol)) ctx.norm_errors.push_back({s, rank, n.value_or(std::nan("")), global, rel});
    }
  }
  for (int64_t s : c.anchors) {
    SP_ASSIGN_OR_RETURN(const AnchorState a, read_anchor(rec, s));
    SP_ASSIGN_OR_RETURN(const ReferenceStep ref, reference(s, a));
    AnchorResult r{
        .step = s, .bytes = a.bytes, .files = a.files, .tol = foreign_tolerances(c, ctx.assembly.targets.at(s))};
    compare_anchor(rec, ctx.assembly, a, ref, r);
    ctx.anchors.push_back(std::move(r));
  }
  return ctx;
}

}  // namespace sp::judge
