#include "plan/traffic_model.h"

#include "comm/deterministic.h"
#include "evidence/bundle_paths.h"
#include "evidence/tensor_summary.h"
#include "model/weights.h"
#include "plan/block_shapes.h"
#include "plan/ps_keys.h"
#include "plan/schedule.h"

namespace sp::plan {
namespace {

struct Ctx {
  const RunPlan& plan;
  const comm::ProcessGrid& grid;
  int rank;
  comm::Coords c;
  // Keyed by the group member's address and the literals' addresses while counting (thousands of adds
  // per step), turned into names once at the end (ops()).
  std::map<std::tuple<const std::string*, const char*, const char*>, Traffic> raw;
  std::string dp, tp, pp, world = "world";
  bool det;
  int64_t sb = 4;  // bytes per element of the residual stream and what carries it (RunPlan::stream_bytes)
  RecordedLayout layout = {};
  void add(const std::string& group, const char* phase, const char* op, int64_t ops, int64_t bytes) {
    Traffic& t = raw[{&group, phase, op}];
    t.ops += ops;
    t.bytes += bytes;
  }
  // A sum over a group of n elements of `b` bytes as the engine performs it: deterministic = all_to_all(n)
  // of the rank's chunks then all_gather(n) of the reduced ones (comm/deterministic.h), or fast all_reduce(n).
  void sum(const std::string& group, const char* phase, int64_t n, int64_t b = 4) {
    if (det) {
      add(group, phase, "all_to_all", 1, b * n);
      add(group, phase, "all_gather", 1, b * n);
    } else {
      add(group, phase, "all_reduce", 1, b * n);
    }
  }
  // Sequence parallelism's halves of that sum: a reduce-scatter of n elements (deterministic: the all_to_all
  // of the rank's chunks, whose owner sums them) and an all-gather into n elements (both modes).
  void reduce_scatter(const std::string& group, const char* phase, int64_t n, int64_t b = 4) {
    add(group, phase, det ? "all_to_all" : "reduce_scatter", 1, b * n);
  }
  void all_gather(const std::string& group, const char* phase, int64_t n, int64_t b) {
    add(group, phase, "all_gather", 1, b * n);
  }
  StepOps ops() const {
    StepOps out;
    for (const auto& [key, t] : raw) {
      Traffic& sum = out[{*std::get<0>(key), std::get<1>(key), std::get<2>(key)}];
      sum.ops += t.ops;
      sum.bytes += t.bytes;
    }
    return out;
  }
};

// A parameter-server step's pushes and pulls (docs/ps.md): every piece of the key space travels once
// per worker each way, point to point on "ps": a worker sends (push) and receives (pull) each piece
// of every unit once; server j receives each of its pieces from all W workers and sends it to all W.
void add_ps_traffic(Ctx& x, const RunPlan& plan, int rank) {
  const comm::RoleMap roles = plan.roles();
  const std::vector<model::UnitLayout> layouts = ps_unit_layouts(plan.config.model);
  std::vector<const model::UnitLayout*> units;
  for (const model::UnitLayout& u : layouts) units.push_back(&u);
  const PsKeySpace keys(units, roles);
  static const std::string ps(comm::kPsGroupName);  // static: Ctx keys by its address
  const bool server = roles.is_server(rank);
  for (int j = 0; j < roles.servers(); ++j) {
    if (server && j != roles.server_index(rank)) continue;
    const int64_t copies = server ? roles.workers() : 1;
    for (const PsPiece& p : keys.pieces(j)) {
      x.add(ps, "push", server ? "recv" : "send", copies, copies * 4 * p.size());
      x.add(ps, "pull", server ? "send" : "recv", copies, copies * 4 * p.size());
    }
  }
}

// Sequence parallelism's tp traffic of one pass (docs/comm.md): in place of add_pass_traffic's sums, per block
// forward an all-gather of each norm output (N·C of the compute dtype) and a reduce-scatter of each row-parallel
// output (N·C fp32), the embedding's reduce-scatter and the head input's all-gather; backward the conjugates —
// an all-gather of dres before each row-parallel backward (fp32; the rounded 16-bit copy in mixed precision;
// fp32 before the embedding's), a reduce-scatter of each column-parallel input gradient — the all-gather of
// each saved norm-output shard again for its GEMM's weight gradient, and the sum of each replicated norm
// weight's gradient (C); recomputation replays the forward ones.
void add_sp_pass_traffic(Ctx& x, const ChunkPlacement& ch, bool forward, const char* phase) {
  const config::RunConfig& rc = x.plan.config;
  const int64_t pb = static_cast<int64_t>(dtype_size(rc.train.precision.compute));
  const int64_t N = rc.train.micro_batch_size * rc.train.seq_len, C = rc.model.dim;
  const int blocks = ch.layer_end - ch.layer_begin;
  const int64_t sb = x.sb;
  auto block_forward = [&] {
    for (int i = 0; i < 2; ++i) {
      x.all_gather(x.tp, phase, N * C, pb);      // norm output → column-parallel input
      x.reduce_scatter(x.tp, phase, N * C, sb);  // row-parallel output → residual shard
    }
  };
  if (forward) {
    if (ch.first) x.reduce_scatter(x.tp, phase, N * C, sb);
    for (int b = 0; b < blocks; ++b) block_forward();
    if (ch.last) x.all_gather(x.tp, phase, N * C, pb);
    return;
  }
  if (ch.last) {
    x.all_gather(x.tp, phase, N * C, pb);  // xf again, for the LM head's weight gradient
    x.reduce_scatter(x.tp, phase, N * C, sb);
    x.sum(x.tp, phase, C);  // model.norm.weight
  }
  for (int b = 0; b < blocks; ++b) {
    if (rc.train.recompute == model::Recompute::kFull) block_forward();
    for (int i = 0; i < 2; ++i) {
      x.all_gather(x.tp, phase, N * C, pb);      // dres → row-parallel backward
      x.all_gather(x.tp, phase, N * C, pb);      // xn2, xn1 again, for gate/up's and q/k/v's weight gradients
      x.reduce_scatter(x.tp, phase, N * C, sb);  // column-parallel input gradient → shard
      x.sum(x.tp, phase, C);                     // post_attention_layernorm, input_layernorm
    }
  }
  if (ch.first) x.all_gather(x.tp, phase, N * C, sb);  // dres → the embedding's scatter-add
}

// A unit's elements on one rank: its tp piece, or the whole unit where the layout keeps it whole.
int64_t unit_numel_of(const Ctx& x, int id) {
  const model::LlamaConfig& m = x.plan.config.model;
  const bool whole =
      (id == model::embed_unit() && !x.layout.embedding_split) || (id == model::head_unit(m) && !x.layout.head_split);
  return model::unit_numel(m, id, whole ? 1 : x.plan.config.parallel.tp);
}

// One forward or backward pass of a chunk for one micro-batch: ZeRO-3's gathers, tensor parallelism's sums
// (two per block forward, two or four with recomputation backward, the vocabulary-parallel loss) and the
// pipeline's activation and gradient p2p.
void add_pass_traffic(Ctx& x, const ChunkPlacement& ch, bool forward, const char* phase) {
  const config::RunConfig& rc = x.plan.config;
  const model::LlamaConfig& m = rc.model;
  const int dp = rc.parallel.dp, tp = rc.parallel.tp, zero = rc.parallel.zero;
  const int64_t pb = static_cast<int64_t>(dtype_size(rc.train.precision.compute));
  const int64_t N = rc.train.micro_batch_size * rc.train.seq_len, C = m.dim;
  const bool sp = rc.parallel.sequence_parallel;
  const int64_t Nb = sp_rows(N, tp, sp);  // the pipeline boundary's token rows
  const int64_t sb = x.sb;                // the residual stream's bytes: tp sums and pipeline messages
  auto numel = [&](int id) { return unit_numel_of(x, id); };
  const int blocks = ch.layer_end - ch.layer_begin;
  if (sp) add_sp_pass_traffic(x, ch, forward, phase);
  const bool fsdp2 = !x.layout.units.empty();
  const bool dtensor = !x.layout.tp_modules.empty();
  if (fsdp2 && dp > 1)
    for (const ShardedUnit& u : x.layout.units)
      if (forward || u.reshard_after_forward) x.all_gather(x.dp, phase, dp * u.padded_numel, pb);
  auto gather = [&](int id) {  // ZeRO-3 acquisition (the engine's; FSDP2's units above; DeepSpeed's: none)
    if (zero == 3 && dp > 1 && !fsdp2 && x.layout.flat_zero.numel.empty())
      x.add(x.dp, phase, "all_gather", 1, pb * numel(id));
  };
  if (forward) {
    if (ch.first) {
      gather(model::embed_unit());
      if (tp > 1 && !sp && x.layout.embedding_split) x.sum(x.tp, phase, N * C, sb);
    }
    for (int l = ch.layer_begin; l < ch.layer_end; ++l) gather(model::block_unit(l));
    if (tp > 1 && !sp && dtensor)
      for (int64_t w : x.layout.tp_modules.rowwise_out) x.sum(x.tp, phase, N * w, sb);
    else if (tp > 1 && !sp)
      for (int b = 0; b < blocks; ++b) {
        x.sum(x.tp, phase, N * C, sb);
        x.sum(x.tp, phase, N * C, sb);
      }
    if (ch.last) {
      gather(model::head_unit(m));
      if (m.tie_embeddings) gather(model::embed_unit());
      if (tp > 1 && x.layout.head_split) {
        x.add(x.tp, phase, "all_reduce", 1, 4 * N);  // max
        x.sum(x.tp, phase, N);                       // Σexp
        x.sum(x.tp, phase, N);                       // target logit
      }
    }
    if (!ch.first) x.add(x.pp, phase, "recv", 1, sb * Nb * C);  // recv_forward
    if (!ch.last) x.add(x.pp, phase, "send", 1, sb * Nb * C);   // send_forward
  } else {
    if (ch.last) {
      gather(model::head_unit(m));
      if (m.tie_embeddings) gather(model::embed_unit());
      if (tp > 1 && !sp && x.layout.head_split) x.sum(x.tp, phase, N * C, sb);
    }
    for (int l = ch.layer_begin; l < ch.layer_end; ++l) gather(model::block_unit(l));
    if (tp > 1 && !sp && dtensor) {
      for (int64_t w : x.layout.tp_modules.colwise_in) x.sum(x.tp, phase, N * w, sb);
    } else if (tp > 1 && !sp) {
      // full replays each block's two forward all-reduces; selective recomputes no communication
      const int per_block = rc.train.recompute == model::Recompute::kFull ? 4 : 2;
      for (int b = 0; b < blocks * per_block; ++b) x.sum(x.tp, phase, N * C, sb);
    }
    if (!ch.last) x.add(x.pp, phase, "recv", 1, sb * Nb * C);   // recv_backward
    if (!ch.first) x.add(x.pp, phase, "send", 1, sb * Nb * C);  // send_backward
  }
}

}  // namespace

int64_t fsdp2_padded_numel(const std::vector<int64_t>& shape, int dp) {
  if (shape.empty()) return 1;
  int64_t n = (shape[0] + dp - 1) / dp;
  for (size_t d = 1; d < shape.size(); ++d) n *= shape[d];
  return n;
}

int64_t deepspeed_flat_numel(int64_t numel, int dp) {
  const int64_t alignment = 2 * static_cast<int64_t>(dp);
  return (numel + alignment - 1) / alignment * alignment;
}

StepOps predict_step_ops(const RunPlan& plan, const comm::ProcessGrid& grid, int rank, bool checksums, bool eval_after,
                         const RecordedLayout& layout) {
  const config::RunConfig& rc = plan.config;
  const model::LlamaConfig& m = rc.model;
  // A parameter server runs no micro-batch and belongs to no grid axis; a worker's axes are itself.
  const bool ps = rc.parallel.parameter_server();
  const bool server = ps && plan.roles().is_server(rank);
  Ctx x{plan, grid, rank, server ? comm::Coords{} : grid.coords_of(rank), {}, "", "", "", "world", false};
  x.layout = layout;
  if (!server) {
    x.dp = grid.group_name(comm::Axis::kDp, rank);
    x.tp = grid.group_name(comm::Axis::kTp, rank);
    x.pp = grid.group_name(comm::Axis::kPp, rank);
  }
  x.det = rc.parallel.reduction == config::Reduction::kDeterministic;
  x.sb = plan.stream_bytes;
  const int dp = rc.parallel.dp, zero = rc.parallel.zero;
  // Bytes per element of the parameters ZeRO gathers and of the gradients dp reduces (mixed precision:
  // 16-bit working weights, train.grad_dtype; docs/memory.md §"What phase 2 changes").
  const int64_t pb = static_cast<int64_t>(dtype_size(rc.train.precision.compute));
  const int64_t gb = static_cast<int64_t>(dtype_size(rc.train.precision.grad));
  const auto chunks = plan.chunks_of(x.c.pp);
  auto numel = [&](int id) { return unit_numel_of(x, id); };

  auto pass = [&](const ChunkPlacement& ch, bool forward, const char* phase) {
    add_pass_traffic(x, ch, forward, phase);
  };
  const auto all_units = [&] {
    std::vector<int> ids;
    for (const auto& ch : chunks)
      for (int id : model::chunk_units(m, ch.layer_begin, ch.layer_end, ch.first, ch.last)) ids.push_back(id);
    return ids;
  }();
  const int64_t n_tensors = model::weight_count(m);
  const int64_t summary_bytes = n_tensors * static_cast<int64_t>(evidence::TensorSummary::kSumWords) * 8;

  auto evaluation = [&] {
    if (rc.train.eval_batches <= 0) return;
    int64_t mine = 0;
    for (int64_t i = x.c.dp; i < rc.train.eval_batches && !server; i += dp) ++mine;
    for (const PipeAction& a : schedule_actions(rc.parallel.schedule, x.c.pp, rc.parallel.pp,
                                                rc.parallel.virtual_stages, std::max<int64_t>(mine, 1)))
      if (a.forward && mine > 0) pass(chunks[static_cast<size_t>(a.virtual_stage)], true, "eval");
    x.add(x.world, "eval", "all_reduce", 1, 8 * rc.train.eval_batches);
  };
  // The training step.
  for (const PipeAction& a : schedule_actions(rc.parallel.schedule, x.c.pp, rc.parallel.pp, rc.parallel.virtual_stages,
                                              plan.local_micro_batches))
    if (!server && !a.weight())  // ZB-H1's W passes communicate nothing
      pass(chunks[static_cast<size_t>(a.virtual_stage)], a.forward, a.forward ? "forward" : "backward");
  const bool fsdp2 = !layout.units.empty();
  const bool flat = !layout.flat_zero.numel.empty();
  if (ps)
    add_ps_traffic(x, plan, rank);
  else if (flat && dp > 1)
    for (int64_t r = 0; r < layout.flat_zero.reductions; ++r)
      for (int64_t n : layout.flat_zero.numel)
        if (zero == 3)
          x.reduce_scatter(x.dp, "grad_sync", n, gb);
        else
          x.sum(x.dp, "grad_sync", n, gb);
  else if (fsdp2 && dp > 1)
    for (const ShardedUnit& u : layout.units) x.add(x.dp, "grad_sync", "reduce_scatter", 1, gb * dp * u.padded_numel);
  else if (dp > 1)
    for (int id : all_units) {
      if (zero == 0)
        x.sum(x.dp, "grad_sync", numel(id), gb);
      else
        x.add(x.dp, "grad_sync", x.det ? "all_to_all" : "reduce_scatter", 1, gb * numel(id));
    }
  x.add(x.world, "evidence", "all_reduce", 1, 8 * plan.micro_batches);          // loss
  x.add(x.world, "optimizer", "all_reduce", 2, summary_bytes + 8 * n_tensors);  // gradient summaries: sums, max
  if ((zero == 1 || zero == 2) && dp > 1 && flat)
    for (int64_t n : layout.flat_zero.numel) x.all_gather(x.dp, "optimizer", deepspeed_flat_numel(n, dp), pb);
  else if ((zero == 1 || zero == 2) && dp > 1 && !fsdp2)
    for (int id : all_units) x.add(x.dp, "optimizer", "all_gather", 1, pb * numel(id));
  if (checksums) x.add(x.world, "evidence", "all_reduce", 2, summary_bytes + 8 * n_tensors);
  if (dp > 1 && zero < 3) x.add(x.world, "evidence", "all_gather", 1, 16 * static_cast<int64_t>(plan.world));
  if (eval_after) evaluation();
  return x.ops();
}

StepTraffic predict_step_traffic(const RunPlan& plan, const comm::ProcessGrid& grid, int rank, bool checksums,
                                 bool eval_after, const RecordedLayout& layout) {
  StepTraffic out;
  for (const auto& [key, t] : predict_step_ops(plan, grid, rank, checksums, eval_after, layout)) {
    Traffic& sum = out[{std::get<0>(key), std::get<1>(key)}];
    sum.ops += t.ops;
    sum.bytes += t.bytes;
  }
  return out;
}

evidence::StepSchedule step_schedule(const config::RunConfig& config) {
  return {.steps = config.train.steps,
          .checksum_every = config.evidence.checksum_every,
          .eval_every = config.train.eval_every};
}

namespace {

nlohmann::json to_json(const StepTraffic& t) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, v] : t) j[key.first][key.second] = {{"ops", v.ops}, {"bytes", v.bytes}};
  return j;
}

}  // namespace

nlohmann::json predict_run_traffic(const RunPlan& plan, const comm::ProcessGrid& grid) {
  nlohmann::json doc = {{"format_version", evidence::kCommPredictedFormatVersion},
                        {"schedule", step_schedule(plan.config).to_json()},
                        {"ranks", nlohmann::json::array()}};
  for (int r = 0; r < plan.world; ++r) {
    nlohmann::json classes = nlohmann::json::object();
    // Step −1: the evaluation before training only.
    StepTraffic initial;
    for (const auto& [k, v] : predict_step_traffic(plan, grid, r, false, true))
      if (k.second == "eval") initial[k] = v;
    classes[std::string(evidence::kInitialEvalClass)] = to_json(initial);
    for (const bool checks : {false, true})
      for (const bool eval : {false, true})
        classes[std::string(evidence::step_class_name(checks, eval))] =
            to_json(predict_step_traffic(plan, grid, r, checks, eval));
    doc["ranks"].push_back({{"rank", r}, {"classes", std::move(classes)}});
  }
  return doc;
}

}  // namespace sp::plan
