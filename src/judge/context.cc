#include "judge/context.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/hash.h"
#include "data/token_batch.h"
#include "judge/diagnosis.h"
#include "judge/replay.h"
#include "model/weights.h"

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

// The tp split the recording declares by its pieces: the embedding and head whole or by rows (vocabulary-
// parallel); anything else Megatron's split does not do (a matrix split along the other dim) is named as what the
// traffic model cannot model.
// FSDP2's units (contract strategy.units) as the traffic model's: each unit's padded shard from the model's shapes.
// Every tensor of the model in exactly one unit; on a dp-only grid (FSDP2 + TP or a pipeline: its dp cells named
// as not modelled).
void recorded_units(const RecordingContract& c, JudgeContext& ctx) {
  if (c.units.empty()) {
    if (c.strategy.zero >= 2 && c.strategy.dp > 1)
      ctx.unmodelled_dp = fmt::format(
          "ZeRO-{} declared without FSDP2's units: the framework's schedule of gathers and reductions is not "
          "modelled (the engine's ZeRO-{} is not the framework's)",
          c.strategy.zero, c.strategy.zero);
    return;
  }
  if (c.strategy.tp > 1 || c.strategy.pp > 1) {
    ctx.unmodelled_dp = fmt::format(
        "FSDP2's units on a dp {} × tp {} × pp {} grid: the dp group's gathers and reductions of tp-local or "
        "per-stage shards are not modelled",
        c.strategy.dp, c.strategy.tp, c.strategy.pp);
    return;
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const model::WeightSpec& w : model::weight_table(c.model.model)) shapes[w.name] = w.shape;
  std::map<std::string, int> seen;
  for (const ShardingUnit& u : c.units) {
    plan::ShardedUnit su{.padded_numel = 0, .reshard_after_forward = u.reshard_after_forward};
    for (const std::string& t : u.tensors) {
      const auto it = shapes.find(t);
      if (it == shapes.end() || seen[t]++ > 0) {
        ctx.unmodelled_dp =
            fmt::format("FSDP2 unit tensor '{}' is {} of the model: the units do not partition it", t.substr(0, 80),
                        it == shapes.end() ? "not a tensor" : "a second time a tensor");
        return;
      }
      su.padded_numel += plan::fsdp2_padded_numel(it->second, c.strategy.dp);
    }
    ctx.layout.units.push_back(su);
  }
  for (const auto& [name, shape] : shapes)
    if (!seen.count(name)) {
      ctx.layout.units.clear();
      ctx.unmodelled_dp = fmt::format("'{}' is in no FSDP2 unit: its dp traffic is not modelled", name);
      return;
    }
}

// DeepSpeed's ZeRO-1/2 as the traffic model's flat groups (plan::FlatZeroGroups) from the recorded config and
// groups; "" when modelled, else why not (its dp cells then stay not compared). Every tensor of the model in
// exactly one group.
std::string deepspeed_groups(const RecordingContract& c, plan::FlatZeroGroups& out) {
  const int zero = c.strategy.zero;
  if (!c.deepspeed)
    return fmt::format(
        "ZeRO-{} partitions recorded as flat fragments (DeepSpeed's) without DeepSpeed's config (contract "
        "strategy.deepspeed: recorded before it existed): its bucketed gradient reduction and its parameter "
        "all-gathers are not modelled",
        zero);
  const DeepSpeedZero& d = *c.deepspeed;
  if (zero == 3)
    return fmt::format(
        "DeepSpeed's ZeRO-3 partitions: its parameter all-gathers follow the module trace it records in step 0 "
        "(a fetch per module then; coalesced prefetches of up to {} elements after) and what stays gathered depends "
        "on max_reuse_distance {} and max_live_parameters {}, so the forward and backward gathers of a step are not "
        "predictable from the layout: its dp traffic is not compared",
        d.prefetch_bucket_size, d.max_reuse_distance, d.max_live_parameters);
  const std::string stage = fmt::format("DeepSpeed's ZeRO-{} with ", zero);
  if (!d.use_multi_rank_bucket_allreduce)
    return stage + "use_multi_rank_bucket_allreduce false (each gradient slice reduced to its owner): not modelled";
  if (d.parameter_alignment)
    return stage + "parameter_alignment (each parameter padded inside its group's buffer): not modelled";
  if (!d.allgather_partitions)
    return stage + "allgather_partitions false (updated partitions broadcast, not all-gathered): not modelled";
  std::map<std::string, int64_t> numel;
  for (const model::WeightSpec& w : model::weight_table(c.model.model)) numel[w.name] = shape_numel(w.shape);
  std::map<std::string, int> seen;
  std::vector<int64_t> sums;
  for (const std::vector<std::string>& g : d.groups) {
    int64_t n = 0;
    for (const std::string& t : g) {
      if (!numel.count(t) || seen[t]++ > 0)
        return fmt::format("DeepSpeed's parameter group tensor '{}' is {} of the model: the groups do not partition it",
                           t.substr(0, 80), numel.count(t) ? "a second time a tensor" : "not a tensor");
      n += numel.at(t);
    }
    sums.push_back(n);
  }
  for (const auto& [name, n] : numel)
    if (!seen.count(name))
      return fmt::format("'{}' is in no DeepSpeed parameter group: its dp traffic is not modelled", name);
  // ZeRO-2 reduces at every backward (its gradient hooks); ZeRO-1 at each accumulation boundary.
  const int64_t backwards = c.micro_batches / c.strategy.dp, gas = d.gradient_accumulation_steps;
  if (zero == 1 && backwards % gas != 0)
    return fmt::format(
        "DeepSpeed's ZeRO-1 with {} backward passes a step and gradient_accumulation_steps {}: the "
        "steps' accumulation boundaries are not fixed by the declaration",
        backwards, gas);
  out.numel = std::move(sums);
  out.reductions = zero == 2 ? backwards : backwards / gas;
  return "";
}

// ZeRO partitions recorded as flat fragments of the tensors (DeepSpeed's): ZeRO-1/2 modelled from the recorded
// config (deepspeed_groups); what is not is named, its dp cells not compared.
bool recorded_fragments(const Recording& rec, JudgeContext& ctx) {
  for (const RankRecords& rr : rec.ranks())
    for (const TensorRecord& t : rr.tensors)
      if (t.shard && t.shard->form == Shard::Form::kFragment) {
        ctx.unmodelled_dp = deepspeed_groups(rec.contract(), ctx.layout.flat_zero);
        return true;
      }
  return false;
}

void recorded_layout(const Recording& rec, JudgeContext& ctx) {
  if (!recorded_fragments(rec, ctx)) recorded_units(rec.contract(), ctx);
  if (rec.contract().strategy.tp < 2) return;
  std::map<std::string, Shape> shapes;
  for (const model::WeightSpec& w : rec.weights()) shapes[w.name] = w.shape;
  for (const RankRecords& rr : rec.ranks())
    for (const TensorRecord& t : rr.tensors) {
      if (t.step != 0 || t.phase != "grad" || !shapes.count(t.tensor)) continue;
      const std::vector<int> cut = t.shard ? t.shard->cut_dims(shapes.at(t.tensor)) : std::vector<int>{};
      const bool whole = cut.empty();
      if (t.tensor == "model.embed_tokens.weight") ctx.layout.embedding_split = !whole;
      if (t.tensor == "lm_head.weight") ctx.layout.head_split = !whole;
      const bool column =
          t.tensor.find("o_proj") != std::string::npos || t.tensor.find("down_proj") != std::string::npos;
      if (!whole && cut != std::vector<int>{column ? 1 : 0} && ctx.unmodelled.empty())
        ctx.unmodelled = fmt::format(
            "{} is split by {} (Megatron's split: by {}): the tp group's forward and "
            "backward traffic of this layout is not modelled",
            t.tensor,
            cut.size() > 1 ? "rows and columns"
            : cut[0] == 0  ? "rows"
            : cut[0] == 1  ? "columns"
                           : "flat fragments",
            column ? "columns" : "rows");
    }
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

std::string JudgeContext::unmodelled_text() const {
  return unmodelled + (!unmodelled.empty() && !unmodelled_dp.empty() ? "; " : "") + unmodelled_dp;
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
  return ctx;
}

}  // namespace sp::judge
