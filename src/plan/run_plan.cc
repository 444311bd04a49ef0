#include "plan/run_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

namespace sp::plan {
namespace {

// The parameter-server rules (docs/ps.md §Configuration): which keys need the architecture, the world
// equation with the servers, and what the servers do not support (each with the reason).
// The bounded-staleness rules shared by the parameter server and its single-process replay: the
// schedule that is built, the bound's range, and what a stale run cannot do (checkpoints).
void staleness_rules(const config::RunConfig& c, std::vector<RuleViolation>& errs) {
  const config::ParallelConfig& p = c.parallel;
  if (p.staleness_schedule == config::StalenessSchedule::kFree)
    errs.push_back(
        "parallel.staleness_schedule = \"free\": the free-running bounded-staleness mode is not built; only the "
        "fixed, reproducible schedule is (docs/ps.md §SSP); hint: parallel.staleness_schedule = \"fixed\"");
  if (p.staleness > 0 && p.staleness >= c.train.steps)
    errs.push_back(fmt::format(
        "parallel.staleness = {} ≥ train.steps = {}: a bound this large never binds (every step may run on the "
        "initial parameters) and the fixed schedule cannot reach staleness {}; hint: parallel.staleness ≤ {}",
        p.staleness, c.train.steps, p.staleness, std::max<int64_t>(c.train.steps - 1, 0)));
  if (p.staleness > 0 && c.evidence.checkpoint_every > 0)
    errs.push_back(fmt::format(
        "parallel.staleness = {} with evidence.checkpoint_every = {}: a checkpoint holds one value per parameter (the "
        "servers' newest), not the older versions the workers compute on, so a stale run could not resume exactly; "
        "hint: evidence.checkpoint_every = 0, or staleness = 0 (BSP resumes exactly, under any architecture)",
        p.staleness, c.evidence.checkpoint_every));
}

// The parameter-server rules (docs/ps.md §Configuration): which keys need the architecture, the world
// equation with the servers, and what the servers do not support (each with the reason).
void parameter_server_rules(const config::RunConfig& c, int world, std::vector<RuleViolation>& errs) {
  const config::ParallelConfig& p = c.parallel;
  if (p.replay_workers > 0) {
    // The single-process replay of a W-worker parameter server (parallel/ssp_replay.h).
    if (p.parameter_server() || world != 1 || p.dp != 1 || p.tp != 1 || p.pp != 1 || p.zero != 0)
      errs.push_back(fmt::format(
          "parallel.replay_workers = {} replays a parameter-server run in one process: it needs architecture = "
          "\"allreduce\", dp = tp = pp = 1, zero = 0 and one process (got architecture = \"{}\", dp = {}, tp = {}, "
          "pp = {}, zero = {}, world {}); hint: run it without mpirun, or drop parallel.replay_workers",
          p.replay_workers, config::architecture_name(p.architecture), p.dp, p.tp, p.pp, p.zero, world));
    const int64_t M = c.train.global_batch / std::max<int64_t>(c.train.micro_batch_size, 1);
    if (M % p.replay_workers != 0 || !std::has_single_bit(static_cast<uint64_t>(M / p.replay_workers)))
      errs.push_back({RuleViolation::Kind::kDoesNotDivide,
                      fmt::format("parallel.replay_workers = {}: the {} micro-batches per step must split into a "
                                  "power-of-two number per worker, as the parameter-server run they replay needs (the "
                                  "canonical tree); hint: global_batch a multiple of micro_batch_size × {} with M/W ∈ "
                                  "{{1, 2, 4, ...}}",
                                  p.replay_workers, M, p.replay_workers)});
    staleness_rules(c, errs);
    return;
  }
  if (!p.parameter_server()) {
    if (p.servers != 0)
      errs.push_back(
          fmt::format("parallel.servers = {} needs parallel.architecture = \"ps\" (an all-reduce run has "
                      "no server ranks); hint: --set parallel.architecture=ps, or drop parallel.servers",
                      p.servers));
    if (p.staleness != 0)
      errs.push_back(
          fmt::format("parallel.staleness = {} needs parallel.architecture = \"ps\": bounded staleness is "
                      "a parameter-server mode, an all-reduce step is synchronous by construction; hint: "
                      "--set parallel.architecture=ps --set parallel.servers=1 (or, in one process, the replay: "
                      "--set parallel.replay_workers=W)",
                      p.staleness));
    if (p.staleness_schedule != config::StalenessSchedule::kFixed)
      errs.push_back(
          "parallel.staleness_schedule = \"free\" needs parallel.architecture = \"ps\" and "
          "parallel.staleness ≥ 1");
    return;
  }
  if (p.servers < 1)
    errs.push_back("parallel.architecture = \"ps\" needs parallel.servers ≥ 1; hint: --set parallel.servers=1");
  else if (p.servers >= world)
    errs.push_back(
        fmt::format("parallel.servers = {} ≥ world size {}: no rank is left to be a worker; hint: launch "
                    "with mpirun -np {} (parallel.dp = {} workers + {} servers)",
                    p.servers, world, p.world(), p.dp, p.servers));
  if (p.tp > 1 || p.pp > 1)
    errs.push_back(fmt::format(
        "parallel.architecture = \"ps\" with tp = {}, pp = {}: a worker is one rank holding a full replica; a "
        "tensor- or pipeline-parallel worker would push and pull slices of tp-sharded units from several ranks, "
        "which the servers' key ranges (contiguous ranges of the logical parameters) do not describe; hint: tp = pp "
        "= 1, parallel.dp = the number of workers",
        p.tp, p.pp));
  if (p.zero != 0)
    errs.push_back(
        fmt::format("parallel.zero = {} with parallel.architecture = \"ps\": the servers already own "
                    "the optimizer state and the parameters in shards; hint: zero = 0",
                    p.zero));
  if (p.reduction != config::Reduction::kDeterministic)
    errs.push_back(
        "parallel.reduction = \"fast\" with parallel.architecture = \"ps\": a server always sums the "
        "pushes in the canonical order (there is no MPI reduction to hand it to); hint: drop "
        "parallel.reduction");
  // Bounded staleness (SSP, docs/ps.md §SSP): the fixed schedule, between at least two workers (the
  // replica exchange that records every worker's version runs only then).
  if (p.staleness > 0 && p.dp < 2)
    errs.push_back(fmt::format(
        "parallel.staleness = {} with one worker (parallel.dp = 1): staleness is recorded and bounded by the "
        "workers' version exchange, which needs ≥ 2 workers; hint: parallel.dp ≥ 2 (and mpirun -np dp + servers)",
        p.staleness));
  staleness_rules(c, errs);
}

// Mixed precision (docs/config.md): what a 16-bit run needs and what it does not support yet.
// Resolves train.gemm16 on this CPU into `resolved` (every rank of a run shares its CPU model).
void precision_rules(const config::RunConfig& c, kernels::Gemm16Kind& resolved, std::vector<RuleViolation>& errs) {
  const model::Precision& pr = c.train.precision;
  resolved = kernels::Gemm16Kind::kAuto;
  if (c.fp16 && pr.compute != DType::kF16)
    errs.push_back(fmt::format(
        "[fp16] (dynamic loss scaling) with train.precision = \"{}\": loss scaling is for fp16 only (bf16 has "
        "fp32's exponent range); hint: drop the [fp16] table, or set train.precision = \"fp16\"",
        model::precision_name(pr.compute)));
  if (!pr.mixed()) {
    if (c.train.gemm16 != kernels::Gemm16Kind::kAuto)
      errs.push_back(fmt::format(
          "train.gemm16 = \"{}\" with train.precision = \"fp32\": the 16-bit GEMM backend only runs in bf16 or "
          "fp16; hint: drop train.gemm16, or set train.precision = \"bf16\"",
          kernels::gemm16_kind_name(c.train.gemm16)));
    return;
  }
  const std::string name(model::precision_name(pr.compute));
  auto kind = kernels::gemm16_resolve(c.train.gemm16, pr.compute, kernels::gemm16_capability());
  if (kind.ok())
    resolved = *kind;
  else
    errs.push_back(fmt::format("train.gemm16 = \"{}\" cannot run train.precision = \"{}\" on this CPU: {}; hint: {}",
                               kernels::gemm16_kind_name(c.train.gemm16), name, kind.status().message(),
                               kind.status().hint().empty() ? "train.gemm16 = \"auto\"" : kind.status().hint()));
  if (pr.compute == DType::kF16 && !c.fp16)
    errs.push_back(
        "train.precision = \"fp16\" needs dynamic loss scaling settings: fp16's 5-bit exponent flushes small "
        "gradients to zero without a loss scale (docs/loss_scaling.md); hint: add an [fp16] table, e.g. --set "
        "fp16.initial_scale_power=16 (DeepSpeed's defaults: initial_scale_power 16, loss_scale_window 1000, "
        "hysteresis 2, min_loss_scale 1)");
  if (pr.grad != DType::kF32 && c.parallel.reduction == config::Reduction::kFast)
    errs.push_back(fmt::format(
        "train.grad_dtype = \"{}\" with parallel.reduction = \"fast\": MPI has no 16-bit floating-point sum, "
        "so 16-bit gradients are reduced only over the canonical tree; hint: parallel.reduction = "
        "\"deterministic\", or train.grad_dtype = \"fp32\"",
        model::precision_name(pr.grad)));
  if (c.parallel.parameter_server())
    errs.push_back(fmt::format(
        "train.precision = \"{}\" with parallel.architecture = \"ps\": the parameter servers keep and send fp32 "
        "parameters only (docs/ps.md); hint: train.precision = \"fp32\", or the all-reduce architecture",
        name));
}

}  // namespace

std::vector<std::string> RunPlan::violations(const config::RunConfig& c, int world) {
  std::vector<std::string> out;
  for (RuleViolation& v : rule_violations(c, world)) out.push_back(std::move(v.message));
  return out;
}

namespace {

// The world size against dp·tp·pp (and servers), and the batch against micro-batches and dp.
void batch_rules(const config::RunConfig& c, int world, std::vector<RuleViolation>& errs) {
  constexpr auto kDivide = RuleViolation::Kind::kDoesNotDivide;
  const config::ParallelConfig& p = c.parallel;
  const config::TrainConfig& t = c.train;
  if (p.parameter_server()) {
    if (world != p.world() && p.servers >= 1 && p.servers < world)
      errs.push_back(
          fmt::format("world size {} ≠ workers dp {} × tp {} × pp {} + servers {} = {}; hint: launch with "
                      "mpirun -np {} or change parallel.dp/servers",
                      world, p.dp, p.tp, p.pp, p.servers, p.world(), p.world()));
  } else if (world != p.workers())  // an all-reduce run has no servers (parallel.servers is refused above)
    errs.push_back(
        fmt::format("world size {} ≠ dp {} × tp {} × pp {} = {}; hint: launch with mpirun -np {} or "
                    "change parallel.dp/tp/pp",
                    world, p.dp, p.tp, p.pp, p.workers(), p.workers()));
  const int64_t M = t.global_batch / t.micro_batch_size;
  if (t.global_batch % t.micro_batch_size != 0)
    errs.push_back({kDivide, fmt::format("train.global_batch {} is not divisible by train.micro_batch_size {}",
                                         t.global_batch, t.micro_batch_size)});
  else if (M % p.dp != 0)
    errs.push_back(
        {kDivide,
         fmt::format("global batch {} is not divisible by micro_batch_size {} × dp {} = {} (each dp rank "
                     "needs a whole number of micro-batches); hint: make global_batch a multiple of {}",
                     t.global_batch, t.micro_batch_size, p.dp, t.micro_batch_size * p.dp, t.micro_batch_size * p.dp)});
  else if (p.dp > 1 && p.reduction == config::Reduction::kDeterministic &&
           !std::has_single_bit(static_cast<uint64_t>(M / p.dp)))
    errs.push_back(
        {kDivide, fmt::format("deterministic reduction needs a power-of-two number of micro-batches per dp rank, "
                              "got M/dp = {}/{} = {} (the canonical summation tree must have each rank's block as a "
                              "subtree, docs/equivalence.md); hint: choose global_batch so that M/dp ∈ {{1, 2, 4, 8, "
                              "...}}, or parallel.reduction = \"fast\"",
                              M, p.dp, M / p.dp)});
}

// What tensor and pipeline parallelism split (heads, FFN columns, vocabulary rows, layers) must divide, and
// the combinations of pipeline, ZeRO, tied embeddings and evaluation that are refused.
void shard_rules(const config::RunConfig& c, std::vector<RuleViolation>& errs) {
  constexpr auto kDivide = RuleViolation::Kind::kDoesNotDivide;
  const config::ParallelConfig& p = c.parallel;
  const config::TrainConfig& t = c.train;
  const model::LlamaConfig& m = c.model;
  const int64_t M = t.global_batch / t.micro_batch_size;
  auto divisible = [&](const char* what, int64_t v, const char* axis, int64_t d) {
    if (d > 0 && v % d != 0)
      errs.push_back({kDivide, fmt::format("{} = {} is not divisible by {} = {}", what, v, axis, d)});
  };
  divisible("model.n_heads", m.n_heads, "parallel.tp", p.tp);
  divisible("model.n_kv_heads", m.n_kv_heads, "parallel.tp", p.tp);
  divisible("model.ffn_dim", m.ffn_dim, "parallel.tp", p.tp);
  if (p.tp > 1 && m.vocab_size % p.tp != 0)
    errs.push_back({kDivide, fmt::format("model.vocab_size = {} is not divisible by parallel.tp = {} (the "
                                         "embedding and LM head are split by vocabulary rows); hint: choose "
                                         "data.vocab_size a multiple of {}",
                                         m.vocab_size, p.tp, p.tp)});
  if (p.sequence_parallel && p.tp == 1)
    errs.push_back(
        "parallel.sequence_parallel = true needs parallel.tp > 1 (it splits the tokens over the tensor-parallel "
        "group); hint: set parallel.tp ≥ 2 or sequence_parallel = false");
  if (p.sequence_parallel && p.tp > 1 && t.seq_len % p.tp != 0)
    errs.push_back({kDivide, fmt::format("train.seq_len = {} is not divisible by parallel.tp = {} (parallel."
                                         "sequence_parallel = true gives each tp rank seq_len / tp tokens); hint: "
                                         "choose seq_len a multiple of {} or sequence_parallel = false",
                                         t.seq_len, p.tp, p.tp)});
  const int v = p.virtual_stages;
  if (v > 1 && p.schedule != config::Schedule::kInterleaved)
    errs.push_back(fmt::format("parallel.virtual_stages = {} needs parallel.schedule = \"interleaved\"", v));
  if (m.n_layers % (int64_t{p.pp} * v) != 0)
    errs.push_back({kDivide, fmt::format("model.n_layers = {} is not divisible by pp × virtual_stages = {} × {} = {}",
                                         m.n_layers, p.pp, v, p.pp * v)});
  if (p.schedule == config::Schedule::kInterleaved) {
    if (p.pp < 2) errs.push_back("the interleaved schedule needs parallel.pp ≥ 2");
    if (M % p.dp == 0 && (M / p.dp) % p.pp != 0)
      errs.push_back({kDivide, fmt::format("the interleaved schedule needs micro-batches per dp rank ({}) to be a "
                                           "multiple of pp ({}), as Megatron-LM requires",
                                           M / p.dp, p.pp)});
  }
  if (p.pp > 1 && m.tie_embeddings)
    errs.push_back(
        "model.tie_embeddings = true with parallel.pp > 1: the embedding (first stage) and the LM head "
        "(last stage) would be one tensor on two ranks; shardproof does not synchronize shared weights "
        "across stages; hint: tie_embeddings = false or pp = 1");
  if (p.pp > 1 && p.zero >= 2)
    errs.push_back(fmt::format(
        "parallel.zero = {} with parallel.pp = {} is refused, as DeepSpeed does: ZeRO-{} {} every micro-batch of the "
        "pipeline, multiplying its collectives by the micro-batch count; hint: zero = 1 with pipeline parallelism",
        p.zero, p.pp, p.zero,
        p.zero == 2 ? "would have to reduce-scatter partitioned gradients after" : "must re-gather parameters for"));
  if (p.zero == 3 && p.dp > 1 && t.eval_batches > 0 && t.eval_batches < p.dp)
    errs.push_back(fmt::format(
        "parallel.zero = 3 with parallel.dp = {} needs train.eval_batches ≥ dp (it is {}): the evaluation splits its "
        "batches over dp, and a dp rank without a batch would skip the ZeRO-3 parameter gathers its group waits in; "
        "hint: train.eval_batches = {}",
        p.dp, t.eval_batches, p.dp));
}

// The run's length, sequence length and learning-rate schedule, and the rank grid's axis order.
void run_rules(const config::RunConfig& c, std::vector<RuleViolation>& errs) {
  const config::ParallelConfig& p = c.parallel;
  const config::TrainConfig& t = c.train;
  const model::LlamaConfig& m = c.model;
  // The loader numbers every sample of the run, step · global_batch + i (data/loader.h): that index and
  // the run's token count must fit in 62 bits.
  if (static_cast<__int128>(t.steps) * t.global_batch * (t.seq_len + 1) > (static_cast<__int128>(1) << 62))
    errs.push_back(
        fmt::format("train.steps × train.global_batch × (train.seq_len + 1) = {} × {} × {} exceeds 2^62 "
                    "(the loader's sample and token numbering)",
                    t.steps, t.global_batch, t.seq_len + 1));
  if (t.seq_len > m.max_seq)
    errs.push_back(fmt::format("train.seq_len = {} exceeds model.max_seq = {}", t.seq_len, m.max_seq));
  if (t.lr_schedule == optim::LrScheduleKind::kCosine && t.min_lr > t.lr)
    errs.push_back(fmt::format("train.min_lr = {} exceeds train.lr = {}", t.min_lr, t.lr));
  // WarmupCosineLR divides by total_num_steps − max(2, warmup_num_steps) (DeepSpeed raises ZeroDivisionError).
  if (const optim::LrSchedule s = t.schedule();
      s.kind == optim::LrScheduleKind::kWarmupCosineLr && s.total_steps <= std::max<int64_t>(2, s.warmup_steps))
    errs.push_back(
        fmt::format("train.lr_schedule = \"warmup_cosine_lr\" needs total_num_steps (train.schedule_steps, "
                    "else train.steps) = {} > max(2, warmup_num_steps = train.warmup_steps = {})",
                    s.total_steps, s.warmup_steps));
  {
    const auto& o = p.axis_order;
    const bool ok = o.size() == 8 && o[2] == '-' && o[5] == '-' && o.find("dp") != std::string::npos &&
                    o.find("tp") != std::string::npos && o.find("pp") != std::string::npos;
    if (!ok)
      errs.push_back(fmt::format("parallel.axis_order = \"{}\" is not an order of tp, dp, pp like \"tp-dp-pp\"", o));
  }
}

// ZB-H1 (plan/schedule.h) splits each backward into B and W; what the split backward (model/llama_stage.h)
// does not cover yet is refused.
void zero_bubble_rules(const config::RunConfig& c, std::vector<RuleViolation>& errs) {
  const config::ParallelConfig& p = c.parallel;
  if (p.schedule != config::Schedule::kZbH1) return;
  const std::string s = "parallel.schedule = \"zb-h1\"";
  if (p.pp < 2)
    errs.push_back(s +
                   " needs parallel.pp ≥ 2 (it fills the pipeline's bubble; at pp = 1 there is none); hint: "
                   "set parallel.pp ≥ 2 or schedule = \"1f1b\"");
  if (p.virtual_stages > 1)
    errs.push_back(
        fmt::format("{} with parallel.virtual_stages = {}: ZB-H1 has one chunk per rank (ZB-V is not "
                    "built); hint: virtual_stages = 1",
                    s, p.virtual_stages));
  if (p.sequence_parallel)
    errs.push_back(s +
                   " with parallel.sequence_parallel = true is not supported yet (the W pass would reduce the "
                   "norms' weight gradients over tp); hint: sequence_parallel = false or schedule = \"1f1b\"");
  if (c.train.recompute == model::Recompute::kFull)
    errs.push_back(s +
                   " with train.recompute = \"full\": the W pass needs each micro-batch's saved activations, "
                   "which full recomputation does not keep; hint: recompute = \"none\" or \"selective\"");
  if (p.reduction == config::Reduction::kFast)
    errs.push_back(s +
                   " with parallel.reduction = \"fast\" is not supported: its one accumulation buffer would "
                   "take the norms' weight gradients in another order than 1F1B; hint: reduction = "
                   "\"deterministic\"");
  if (p.parameter_server() || p.replay_workers > 0)
    errs.push_back(s +
                   " with a parameter-server architecture is not supported; hint: architecture = "
                   "\"allreduce\" or schedule = \"1f1b\"");
}

}  // namespace

std::vector<RuleViolation> RunPlan::rule_violations(const config::RunConfig& c, int world) {
  std::vector<RuleViolation> errs;
  parameter_server_rules(c, world, errs);
  kernels::Gemm16Kind gemm16 = kernels::Gemm16Kind::kAuto;
  precision_rules(c, gemm16, errs);
  batch_rules(c, world, errs);
  shard_rules(c, errs);
  zero_bubble_rules(c, errs);
  run_rules(c, errs);
  return errs;
}

Result<RunPlan> RunPlan::make(const config::RunConfig& c, int world) {
  const std::vector<std::string> errs = violations(c, world);
  if (!errs.empty()) {
    std::string msg = "invalid parallel configuration:";
    for (const auto& e : errs) msg += "\n  - " + e;
    return Status(StatusCode::kInvalidArgument, msg);
  }
  const int64_t M = c.train.global_batch / c.train.micro_batch_size;
  const config::ParallelConfig& p = c.parallel;
  RunPlan plan;
  plan.config = c;
  plan.world = world;
  plan.micro_batches = M;
  plan.local_micro_batches = M / p.dp;
  std::vector<RuleViolation> unused;
  precision_rules(c, plan.gemm16, unused);  // the backend the rules resolved (they passed)
  return plan;
}

ChunkPlacement RunPlan::chunk(int c) const {
  const int pp = config.parallel.pp;
  const int n = chunk_count();
  const int per = static_cast<int>(config.model.n_layers) / n;
  ChunkPlacement ch;
  ch.chunk = c;
  ch.pp_rank = c % pp;
  ch.virtual_stage = c / pp;
  ch.layer_begin = c * per;
  ch.layer_end = (c + 1) * per;
  ch.first = c == 0;
  ch.last = c == n - 1;
  return ch;
}

std::vector<ChunkPlacement> RunPlan::chunks_of(int pp_rank) const {
  std::vector<ChunkPlacement> out;
  for (int j = 0; j < config.parallel.virtual_stages; ++j) out.push_back(chunk(j * config.parallel.pp + pp_rank));
  return out;
}

comm::RoleMap RunPlan::roles() const {
  const config::ParallelConfig& pc = config.parallel;
  auto r = comm::RoleMap::create(pc.workers(), pc.parameter_server() ? pc.servers : 0, world);
  SP_CHECK(r.ok(), "the plan's roles: {}", r.status().message());
  return *r;
}

std::string gemm16_backend_name(const RunPlan& plan) {
  const model::Precision& pr = plan.config.train.precision;
  if (!pr.mixed()) return "";
  auto g = kernels::make_gemm16(plan.gemm16, pr.compute);
  SP_CHECK(g.ok(), "the planned 16-bit GEMM backend {}: {}", kernels::gemm16_kind_name(plan.gemm16),
           g.status().message());
  return (*g)->name();
}

}  // namespace sp::plan
