#include "judge/context.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/hash.h"
#include "data/token_batch.h"
#include "judge/diagnosis.h"
#include "judge/replay.h"
#include "model/weights.h"
#include "plan/promise.h"

namespace sp::judge {
namespace {

constexpr double kU = 5.9604644775390625e-08;  // 2^-24

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

// Every micro-batch's ids by their SHA-256; a second occurrence is a repeat.
Result<std::vector<DataRepeat>> data_repeats(const Recording& rec) {
  const RecordingContract& c = rec.contract();
  const int64_t per = c.strategy.micro_batch_size * (c.seq_len + 1);
  std::map<std::string, DataRepeat> first;
  std::vector<DataRepeat> out;
  for (int64_t s = 0; s < c.steps; ++s)
    for (const Recording::TokenPiece& p : rec.token_pieces(s)) {
      auto batch = data::read_token_batch(rec.path(p.file), c.model.model.vocab_size);
      if (!batch.ok()) return invalid_argument("recording '{}' refused: {}", rec.dir(), batch.status().message());
      if (static_cast<int64_t>(batch->tokens.size()) != per * static_cast<int64_t>(p.indices.size()))
        continue;  // the reference refuses its shape, naming it
      for (size_t j = 0; j < p.indices.size(); ++j) {
        const std::string key = sha256_hex(
            std::string_view(reinterpret_cast<const char*>(batch->tokens.data() + static_cast<int64_t>(j) * per),
                             sizeof(int32_t) * static_cast<size_t>(per)));
        const DataRepeat here{.step = s,
                              .index = p.indices[j],
                              .first_step = s,
                              .first_index = p.indices[j],
                              .rank = p.rank,
                              .first_rank = p.rank};
        auto [it, added] = first.emplace(key, here);
        if (!added)
          out.push_back({.step = s,
                         .index = p.indices[j],
                         .first_step = it->second.step,
                         .first_index = it->second.index,
                         .rank = p.rank,
                         .first_rank = it->second.rank});
      }
    }
  return out;
}

}  // namespace

double clip_norm_tolerance(int64_t longest, int64_t tensors, int64_t ranks, int64_t lanes) {
  lanes = std::max<int64_t>(lanes, 1);
  const double k = static_cast<double>((longest + lanes - 1) / lanes + 2 * lanes + tensors + ranks + 8);
  if (k * kU >= 0.5) return std::numeric_limits<double>::infinity();
  const double g = k * kU / (1 - k * kU);
  return g / (1 + std::sqrt(1 - g)) + 2 * kU;
}

double clip_norm_tolerance(const RecordingContract& c) {
  int64_t longest = 0, tensors = 0;
  for (const model::WeightSpec& w : model::weight_table(c.model.model)) {
    int64_t n = 1;
    for (int64_t d : w.shape) n *= d;
    longest = std::max(longest, n);
    ++tensors;
  }
  return clip_norm_tolerance(longest, tensors, c.world, c.norm_lanes);
}

JudgeTolerances foreign_tolerances(const RecordingContract& c, int64_t targets) {
  const model::LlamaConfig& m = c.model.model;
  JudgeTolerances t;
  t.reductions = 19 * m.n_layers + 6;
  t.longest = std::max({m.dim, 2 * m.ffn_dim, c.seq_len, (m.n_heads + 2 * m.n_kv_heads) * m.head_dim()});
  t.token = (std::sqrt(static_cast<double>(t.reductions * t.longest)) + static_cast<double>(c.seq_len)) * kU;
  t.loss = t.token;
  t.grad = t.token * std::sqrt(static_cast<double>(std::max<int64_t>(targets, 1)));
  t.update = 16 * kU;
  t.norm = clip_norm_tolerance(c);
  t.semantics = 1.52587890625e-05;  // 2^-16
  if (c.sixteen_bit()) {            // docs/equivalence.md §8: the envelope of both sides' rounding points
    t.rounding_points = bf16_rounding_points(c);
    const double env = plan::rounding_envelope(c.sixteen_dtype(), static_cast<double>(t.rounding_points));
    t.loss = std::max(t.loss, env);
    t.grad = std::max(t.grad, env);
  }
  return t;
}

int64_t bf16_rounding_points(const RecordingContract& c) {
  const int64_t L = c.model.model.n_layers;
  if (c.param_bf16) return (13 + 42) * L + 4 + 9;
  return c.autocast_bf16 || c.autocast_fp16 ? (13 + 16) * L + 4 + 4 : 0;  // autocast casts alike to bf16 and fp16
}

bool gradient_in_fp32(const RecordingContract& c, const std::string& name) {
  if (c.param_bf16) return false;
  if (!c.autocast_bf16 && !c.autocast_fp16) return true;
  const auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.ends_with(s); };
  return ends("layernorm.weight") || name == "model.norm.weight" ||
         (name == "model.embed_tokens.weight" && !c.model.model.tie_embeddings);
}

bool sixteen_bit_values(const TensorError& e) { return e.nonzero >= 32 && 2 * e.sixteen > e.nonzero; }

std::string JudgeContext::traffic_unmodelled() const {
  return unmodelled + (!unmodelled.empty() && !unmodelled_dp.empty() ? "; " : "") + unmodelled_dp;
}

std::string JudgeContext::unmodelled_text() const {
  std::string out = traffic_unmodelled();
  if (!out.empty()) out = "traffic not compared: " + out;
  for (const std::string* more : {&norm_unbounded, &gradients_uncompared})
    out += (!out.empty() && !more->empty() ? "; " : "") + *more;
  return out;
}

bool scaler_skipped(const Recording& rec, int64_t step) {
  for (const RankRecords& rr : rec.ranks()) {
    const auto& sc = rr.steps[static_cast<size_t>(step)].scaler;
    if (sc && sc->found_inf) return true;
  }
  return false;
}

std::vector<int64_t> JudgeContext::unchecked_steps() const {
  std::vector<int64_t> out;
  for (const StepResult& s : steps)
    if (!s.checked) out.push_back(s.step);
  return out;
}

Result<JudgeContext> JudgeContext::make(const Recording& rec, const ReferenceFn& reference,
                                        const std::map<int64_t, StepResult>* judged) {
  JudgeContext ctx;
  ctx.recording = &rec;
  const RecordingContract& c = rec.contract();
  SP_ASSIGN_OR_RETURN(ctx.assembly, assemble_checksums(rec));
  ctx.trace = evidence::check_trace_dir(rec.dir());
  ctx.plan = declared_plan(c);
  recorded_layout(rec, ctx);
  SP_ASSIGN_OR_RETURN(ctx.repeats, data_repeats(rec));
  // Every rank's clip norm against the norm of the logical gradient (exact, from the assembled checksums).
  for (int64_t s = 0; s < c.steps; ++s) {
    if (!c.checksums_at(s) || !(c.max_grad_norm > 0) || scaler_skipped(rec, s)) continue;  // skipped: inf norms
    double sq = 0;
    for (const AssembledTensor& t : ctx.assembly.tensors)
      if (t.step == s && t.phase == "grad") sq += t.summary.stats.sum_squares();
    const double global = std::sqrt(sq);
    const double tol = foreign_tolerances(c, ctx.assembly.targets.at(s)).norm;
    if (!std::isfinite(tol)) {  // a piece too long for any fp32 bound: the norms are not compared, never passed
      ctx.norm_unbounded = "clip norms not compared: a tensor too long to bound its fp32 sum of squares";
      break;
    }
    for (int rank = 0; rank < c.world; ++rank) {
      ++ctx.norm_checks;
      const std::optional<double> n = step_of(rec, rank, s).grad_norm;
      const double rel = n ? std::abs(*n - global) / std::max(global, 1e-30) : std::numeric_limits<double>::infinity();
      if (!(rel <= tol)) {
        NormError e{s, rank, n.value_or(std::nan("")), global, rel};
        if (n && std::isfinite(*n)) e.pattern = norm_pattern(rec, ctx.assembly, s, rank, *n, tol);
        if (n && !std::isfinite(*n))
          e.pattern = fmt::format("rank {}'s norm is {}: the gradient holds NaN or Inf", rank, *n);
        ctx.norm_errors.push_back(std::move(e));
      }
    }
  }
  if (c.every_step()) {
    SP_RETURN_IF_ERROR(judge_every_step(rec, ctx.assembly, reference, ctx.steps, judged));
  } else {
    SP_RETURN_IF_ERROR(judge_anchors(rec, ctx.assembly, reference, ctx.steps));
  }
  const auto compared = [](const StepResult& s) { return s.checked && !s.overflow; };
  const auto skipped = [](const StepResult& s) { return s.checked && s.overflow; };
  if (std::none_of(ctx.steps.begin(), ctx.steps.end(), compared) &&
      std::any_of(ctx.steps.begin(), ctx.steps.end(), skipped))
    ctx.gradients_uncompared = "gradients not compared: GradScaler skipped every step (each overflowed)";
  return ctx;
}

}  // namespace sp::judge
