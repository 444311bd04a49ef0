// The layout a recording declares, as the traffic model's input (plan::RecordedLayout), and what of it the model
// cannot model (JudgeContext::unmodelled for the tp cells, unmodelled_dp for the dp cells, each with its reason):
// the tp split its pieces show (the embedding and head whole or vocabulary-parallel; Megatron's split, or DTensor's
// ColwiseParallel / RowwiseParallel plan where the contract declares tp_plan "dtensor"), FSDP2's units (contract
// strategy.units, over tp-local shards under DTensor's plan) and DeepSpeed's ZeRO-1/2 flat groups (strategy.deepspeed).
// Invariant: a pure function of the recording; a cell is either modelled here or named as not compared, never both.
#include <fmt/format.h>

#include <map>
#include <set>

#include "judge/context.h"
#include "model/weights.h"

namespace sp::judge {
namespace {

bool is_row_parallel(const std::string& t) {  // Megatron's RowwiseParallel matrices: split by columns
  return t.find("o_proj") != std::string::npos || t.find("down_proj") != std::string::npos;
}

// Under DTensor's plan: per tensor, the dims in which the pieces of ranks that differ only in their tp coordinate
// differ (step 0's gradient pieces): the tp split, told apart from FSDP2's dp split of the same tensor. Empty: the
// tensor is whole on the tp axis (replicated, or only dp-sharded).
std::map<std::string, std::vector<int>> tp_cuts(const Recording& rec) {
  std::map<std::string, Shape> shapes;
  for (const model::WeightSpec& w : rec.weights()) shapes[w.name] = w.shape;
  const comm::ProcessGrid& grid = rec.grid();
  // tensor → (dp, pp) → the piece of each tp coordinate
  std::map<std::string, std::map<std::pair<int, int>, std::map<int, PieceKey>>> seen;
  for (const RankRecords& rr : rec.ranks())
    for (const TensorRecord& t : rr.tensors) {
      if (t.step != 0 || t.phase != "grad" || !shapes.count(t.tensor)) continue;
      const comm::Coords c = grid.coords_of(t.rank);
      seen[t.tensor][{c.dp, c.pp}][c.tp] = piece_key(t.shard, shapes.at(t.tensor));
    }
  std::map<std::string, std::vector<int>> out;
  for (const auto& [tensor, by_line] : seen) {
    std::set<int> dims;
    for (const auto& [line, by_tp] : by_line)
      for (const auto& [tp, key] : by_tp) {
        const PieceKey& first = by_tp.begin()->second;
        if (std::get<0>(key) || std::get<0>(first)) {
          if (key != first) dims.insert(-1);  // flat fragments: not a dim
          continue;
        }
        for (size_t d = 0; d < std::get<1>(key).size(); ++d)
          if (std::get<1>(key)[d] != std::get<1>(first)[d] || std::get<2>(key)[d] != std::get<2>(first)[d])
            dims.insert(static_cast<int>(d));
      }
    out[tensor] = std::vector<int>(dims.begin(), dims.end());
  }
  return out;
}

// FSDP2's units (contract strategy.units) as the traffic model's: each unit's padded shard from the model's shapes,
// tp-local under DTensor's plan (`cuts`: the tp split of each tensor, one dim that tp divides). Every tensor of the
// model in exactly one unit; a pipeline's units (pp > 1), or tp > 1 without DTensor's plan, are named as not
// modelled (the dp cells).
void recorded_units(const RecordingContract& c, const std::map<std::string, std::vector<int>>* cuts,
                    JudgeContext& ctx) {
  if (c.units.empty()) {
    if (c.strategy.zero >= 2 && c.strategy.dp > 1)
      ctx.unmodelled_dp = fmt::format(
          "ZeRO-{} declared without FSDP2's units: the framework's schedule of gathers and reductions is not "
          "modelled (the engine's ZeRO-{} is not the framework's)",
          c.strategy.zero, c.strategy.zero);
    return;
  }
  if ((c.strategy.tp > 1 && !cuts) || c.strategy.pp > 1) {
    ctx.unmodelled_dp = fmt::format(
        "FSDP2's units on a dp {} × tp {} × pp {} grid: the dp group's gathers and reductions of {} shards are not "
        "modelled",
        c.strategy.dp, c.strategy.tp, c.strategy.pp, c.strategy.pp > 1 ? "per-stage" : "tp-local (no DTensor plan)");
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
      std::vector<int64_t> local = it->second;
      const std::vector<int> cut = cuts && cuts->count(t) ? cuts->at(t) : std::vector<int>{};
      if (cut.size() > 1 || (cut.size() == 1 && (cut[0] < 0 || local[cut[0]] % c.strategy.tp != 0))) {
        ctx.layout.units.clear();
        ctx.unmodelled_dp = fmt::format(
            "FSDP2 unit tensor '{}' is split by tp in a way that is not one dim tp divides: its tp-local shard, "
            "and the unit's gathers, are not modelled",
            t.substr(0, 80));
        return;
      }
      if (cut.size() == 1) local[cut[0]] /= c.strategy.tp;
      su.padded_numel += plan::fsdp2_padded_numel(local, c.strategy.dp);
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

// DeepSpeed's ZeRO-1/2 (ZeRO-3: its gradient reduce-scatters) as the traffic model's flat groups (plan::FlatZeroGroups)
// from the recorded config and groups; "" when modelled, else why not (its dp cells then stay not compared). Every
// tensor of the model in exactly one group.
std::string deepspeed_groups(const RecordingContract& c, plan::FlatZeroGroups& out) {
  const int zero = c.strategy.zero;
  if (!c.deepspeed)
    return fmt::format(
        "ZeRO-{} partitions recorded as flat fragments (DeepSpeed's) without DeepSpeed's config (contract "
        "strategy.deepspeed: recorded before it existed): its bucketed gradient reduction and its parameter "
        "all-gathers are not modelled",
        zero);
  const DeepSpeedZero& d = *c.deepspeed;
  const int64_t backwards = c.micro_batches / c.strategy.dp, dp = c.strategy.dp;
  if (zero == 3) {  // every backward reduce-scatters each gradient, padded to a multiple of dp
    int64_t padded = 0;
    for (const model::WeightSpec& w : model::weight_table(c.model.model))
      padded += (shape_numel(w.shape) + dp - 1) / dp * dp;
    out.numel = {padded};
    out.reductions = backwards;
    return fmt::format(
        "DeepSpeed's ZeRO-3 parameter all-gathers follow the module trace it records in step 0 (a fetch per module "
        "then; coalesced prefetches of up to {} elements after) and what stays gathered depends on "
        "max_reuse_distance {} and max_live_parameters {}, so a step's forward and backward gathers are not "
        "predictable from the layout: its dp forward and backward cells are not compared (its gradient "
        "reduce-scatters are)",
        d.prefetch_bucket_size, d.max_reuse_distance, d.max_live_parameters);
  }
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
  const int64_t gas = d.gradient_accumulation_steps;
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
        if (rec.contract().strategy.zero == 3 && !ctx.layout.flat_zero.numel.empty())
          ctx.unmodelled_dp_phases = {"forward", "backward"};
        return true;
      }
  return false;
}

// The tp split as Megatron's (the engine's model): the embedding and head whole or by rows, every other matrix
// by rows or (o_proj, down_proj) by columns; `cut` of a tensor from its pieces (tp_cuts) or, without DTensor's
// plan, from each piece's own cut.
void megatron_split(const std::string& tensor, const std::vector<int>& cut, JudgeContext& ctx) {
  const bool whole = cut.empty();
  if (tensor == "model.embed_tokens.weight") ctx.layout.embedding_split = !whole;
  if (tensor == "lm_head.weight") ctx.layout.head_split = !whole;
  const bool column = is_row_parallel(tensor);
  if (!whole && cut != std::vector<int>{column ? 1 : 0} && ctx.unmodelled.empty())
    ctx.unmodelled = fmt::format(
        "{} is split by {} (Megatron's split: by {}): the tp group's forward and backward traffic of this layout is "
        "not modelled",
        tensor,
        cut.size() > 1 ? "rows and columns"
        : cut[0] == 0  ? "rows"
        : cut[0] == 1  ? "columns"
                       : "flat fragments",
        column ? "columns" : "rows");
}

// DTensor's plan (contract tp_plan "dtensor") as the traffic model's tp_modules: every matrix split by rows is a
// ColwiseParallel module (its input gradient all-reduced backward: in_features wide), by columns a RowwiseParallel
// one (its output all-reduced forward: out_features wide). The embedding and head must be whole, pp 1.
void dtensor_modules(const RecordingContract& c, const std::map<std::string, std::vector<int>>& cuts,
                     JudgeContext& ctx) {
  if (c.tp_plan == "dtensor-sequence-parallel") {
    ctx.unmodelled =
        "DTensor's tensor parallelism with SequenceParallel (a norm weight on the tp dim): its "
        "all-gathers and reduce-scatters are not modelled";
    return;
  }
  if (!ctx.unmodelled.empty()) return;
  if (ctx.layout.embedding_split || ctx.layout.head_split || c.strategy.pp > 1) {
    ctx.unmodelled =
        fmt::format("DTensor's plan with {}: the tp group's traffic of this layout is not modelled",
                    c.strategy.pp > 1 ? "a pipeline" : "a vocabulary-parallel embedding or head (loss parallelism)");
    return;
  }
  for (const model::WeightSpec& w : model::weight_table(c.model.model)) {
    const std::vector<int> cut = cuts.count(w.name) ? cuts.at(w.name) : std::vector<int>{};
    if (cut == std::vector<int>{0}) ctx.layout.tp_modules.colwise_in.push_back(w.shape[1]);
    if (cut == std::vector<int>{1}) ctx.layout.tp_modules.rowwise_out.push_back(w.shape[0]);
  }
}

}  // namespace

void recorded_layout(const Recording& rec, JudgeContext& ctx) {
  const RecordingContract& c = rec.contract();
  const bool dtensor = !c.tp_plan.empty();
  const std::map<std::string, std::vector<int>> cuts =
      dtensor ? tp_cuts(rec) : std::map<std::string, std::vector<int>>{};
  if (!recorded_fragments(rec, ctx)) recorded_units(c, dtensor ? &cuts : nullptr, ctx);
  if (c.strategy.tp < 2) return;
  if (dtensor) {
    for (const auto& [tensor, cut] : cuts) megatron_split(tensor, cut, ctx);
    dtensor_modules(c, cuts, ctx);
    return;
  }
  std::map<std::string, Shape> shapes;
  for (const model::WeightSpec& w : rec.weights()) shapes[w.name] = w.shape;
  for (const RankRecords& rr : rec.ranks())
    for (const TensorRecord& t : rr.tensors)
      if (t.step == 0 && t.phase == "grad" && shapes.count(t.tensor))
        megatron_split(t.tensor, t.shard ? t.shard->cut_dims(shapes.at(t.tensor)) : std::vector<int>{}, ctx);
}

}  // namespace sp::judge
