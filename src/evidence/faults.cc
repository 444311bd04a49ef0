#include "evidence/faults.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <functional>

#include "ckpt/names.h"
#include "comm/staleness.h"
#include "core/check.h"
#include "core/file_io.h"
#include "core/log.h"

namespace sp::evidence {

std::string_view view_name(View v) {
  switch (v) {
    case View::kTraceConsistency:
      return "trace consistency";
    case View::kTraceVsPrediction:
      return "trace vs predicted communication";
    case View::kActivations:
      return "per-layer activation trace";
    case View::kChecksums:
      return "gradient/parameter checksums vs reference";
    case View::kReplicas:
      return "dp replica consistency";
    case View::kCheckpoint:
      return "checkpoint integrity";
    case View::kEval:
      return "independent evaluation";
    case View::kJob:
      return "job status";
  }
  return "?";
}

const std::vector<FaultInfo>& fault_catalogue() {
  static const std::vector<FaultInfo> k = {
      {FaultKind::kSkipGradAllreduce, "skip-grad-allreduce",
       "every rank skips the dp gradient sync of one unit (a parameter missing from the all-reduce)",
       View::kTraceVsPrediction, "grad_sync bytes below the plan at that step on the dp groups", "dp > 1",
       Reach::kEveryRank},
      {FaultKind::kStaleGrad, "stale-grad",
       "one rank does not zero its gradient buffers: last step's gradient leaks in", View::kChecksums,
       "grad digests differ from the reference from that step on", "steps ≥ 2 and step ≥ 1", Reach::kOneRank, false, 1},
      {FaultKind::kWrongLossScale, "wrong-loss-scale",
       "one rank divides by its micro-batch's token count instead of the global batch's", View::kChecksums,
       "grad digests differ at that step (loss unchanged at that step)", "micro-batches ≥ 2"},
      {FaultKind::kDropTpAllreduce, "drop-tp-allreduce",
       "the forward all-reduce after o_proj of the first block is skipped", View::kTraceVsPrediction,
       "forward bytes below the plan on the tp groups at that step", "tp > 1", Reach::kEveryRank},
      {FaultKind::kPpMicrobatchSwap, "pp-microbatch-swap",
       "the last pipeline stage pairs micro-batches 0 and 1 with each other's targets", View::kChecksums,
       "the loss differs from the reference at that step", "pp > 1 and micro-batches per dp rank ≥ 2",
       Reach::kEveryRank},
      {FaultKind::kZero3StaleParam, "zero3-stale-param",
       "one rank serves its pre-update shard of the first block in the step's ZeRO-3 gathers", View::kActivations,
       "block.0's output differs from the reference at that step (the loss follows)", "zero = 3, dp > 1, step ≥ 1",
       Reach::kOneRankSpreads, false, 1},
      {FaultKind::kDesyncExtraCollective, "desync-extra-collective", "one rank issues one extra all-reduce",
       View::kTraceConsistency, "the checker names the group, sequence number, ranks and field", "world > 1"},
      {FaultKind::kRankCrash, "rank-crash", "one rank is killed (SIGKILL) in the middle of the step", View::kJob,
       "the job ends with a non-zero status naming the rank; its trace stops", "world > 1"},
      {FaultKind::kCkptBitflip, "ckpt-bitflip", "one bit of a committed checkpoint shard flips", View::kCheckpoint,
       "SHA-256 mismatch naming the file", "a checkpoint", Reach::kOneRank, true},
      {FaultKind::kCkptTruncate, "ckpt-truncate", "a committed checkpoint shard loses its last byte", View::kCheckpoint,
       "size mismatch naming the file", "a checkpoint", Reach::kOneRank, true},
      {FaultKind::kCkptMissingShard, "ckpt-missing-shard", "a committed checkpoint shard is deleted", View::kCheckpoint,
       "missing file named", "a checkpoint", Reach::kOneRank, true},
      {FaultKind::kDataOrder, "data-order", "one rank draws its micro-batches with another seed", View::kActivations,
       "the embedding output of that rank's micro-batches differs at that step", "none"},
      {FaultKind::kTpGradScale, "tp-grad-scale",
       "one tp rank's shard of the first block's o_proj weight gradient is 1 + 2^-7 times too large (1 + 2^-2 in mixed "
       "precision; a wrong per-rank factor: the kind of tensor-parallel bug rounding could hide)",
       View::kChecksums, "that gradient leaves the single-step tolerance at that anchored step", "tp > 1"},
      {FaultKind::kNanInjection, "nan-injection", "one rank's first micro-batch gradient gets a NaN", View::kChecksums,
       "non-finite gradients at that step, no update applied", "none"},
      {FaultKind::kPsDropPush, "ps-drop-push",
       "a parameter server drops worker 0's push for one step: that worker's gradient is missing from the sum",
       View::kTraceVsPrediction, "push bytes below the plan on the ps group at that step (the server and worker 0)",
       "a parameter-server run, rank = a server", Reach::kOneRankSpreads},
      {FaultKind::kPsStalePull, "ps-stale-pull",
       "a worker keeps its replica instead of taking the pull it must take: it computes the next step on parameters "
       "older than the staleness bound allows",
       View::kReplicas,
       "that worker named at that step (BSP: its replica differs from worker 0's; SSP: its version is beyond the "
       "bound)",
       "a parameter-server run with ≥ 2 workers, rank = a worker ≥ 1 that the schedule refreshes after that step"},
      {FaultKind::kPsApplyTwice, "ps-apply-twice", "a parameter server applies its update twice in one step",
       View::kChecksums, "parameter digests differ from the reference at that step (its gradients are equal)",
       "a parameter-server run, rank = a server"},
      {FaultKind::kDropSpNormGradReduce, "drop-sp-norm-grad-reduce",
       "under sequence parallelism every tp rank skips the sums of the replicated norm weights' gradients over the "
       "tp group (each keeps the gradient of its own tokens only)",
       View::kTraceVsPrediction,
       "backward bytes below the plan on the tp groups at that step; the norms' gradient checksums leave the "
       "tolerance at that step",
       "tp > 1 and parallel.sequence_parallel = true", Reach::kEveryRank},
      {FaultKind::kZbDropW, "zb-drop-w",
       "under ZB-H1 one pipeline rank drops the W pass of its first micro-batch: that micro-batch's weight gradients "
       "are missing from the sum",
       View::kChecksums, "grad digests of that stage's parameters differ from the reference at that step",
       "parallel.schedule = \"zb-h1\" and a rank on pipeline stage ≥ 1 (the first stage runs full backwards)"},
      {FaultKind::kZbRepeatW, "zb-repeat-w",
       "under ZB-H1 one pipeline rank runs the W pass of its first micro-batch twice: its weight gradients are "
       "added twice",
       View::kChecksums, "grad digests of that stage's parameters differ from the reference at that step",
       "parallel.schedule = \"zb-h1\" and a rank on pipeline stage ≥ 1 (the first stage runs full backwards)"},
  };
  return k;
}

const FaultInfo& fault_info(FaultKind kind) {
  for (const FaultInfo& f : fault_catalogue())
    if (f.kind == kind) return f;
  SP_CHECK(false, "no catalogue entry for fault kind {}", static_cast<int>(kind));
  __builtin_unreachable();
}

std::string FaultSpec::to_string() const {
  if (!any()) return "none";
  return fmt::format("{}@{}:{}", fault_info(kind).name, step, rank);
}

bool FaultSpec::fires(FaultKind k, int64_t at_step, int at_rank) const {
  if (kind != k || at_step != step) return false;
  return fault_info(k).reach == Reach::kEveryRank || at_rank == rank;
}

bool is_checkpoint_fault(FaultKind kind) { return kind != FaultKind::kNone && fault_info(kind).checkpoint; }

std::string_view default_fault_name(int dp, int tp, int pp, int servers) {
  if (servers > 0) return fault_info(FaultKind::kPsDropPush).name;
  if (dp > 1) return fault_info(FaultKind::kSkipGradAllreduce).name;
  if (tp > 1) return fault_info(FaultKind::kDropTpAllreduce).name;
  if (pp > 1) return fault_info(FaultKind::kPpMicrobatchSwap).name;
  return fault_info(FaultKind::kStaleGrad).name;
}

Result<FaultSpec> parse_fault(std::string_view text) {
  FaultSpec f;
  std::string_view name = text;
  auto number = [&](std::string_view s, const char* what, int64_t& out) -> Status {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size() || out < 0)
      return invalid_argument("--fault '{}': the {} '{}' is not a non-negative integer", text, what, s);
    return Status();
  };
  if (const auto colon = name.find(':'); colon != std::string_view::npos) {
    int64_t r = 0;
    SP_RETURN_IF_ERROR(number(name.substr(colon + 1), "rank", r));
    f.rank = static_cast<int>(r);
    name = name.substr(0, colon);
  }
  if (const auto at = name.find('@'); at != std::string_view::npos) {
    SP_RETURN_IF_ERROR(number(name.substr(at + 1), "step", f.step));
    name = name.substr(0, at);
  }
  for (const FaultInfo& i : fault_catalogue())
    if (i.name == name) {
      f.kind = i.kind;
      return f;
    }
  std::string names;
  for (const FaultInfo& i : fault_catalogue()) names += (names.empty() ? "" : ", ") + std::string(i.name);
  return invalid_argument("unknown fault '{}'", name).with_hint("the catalogue: " + names + " (NAME[@step][:rank])");
}

int default_fault_rank(FaultKind kind, const FaultTarget& run) {
  if (run.servers > 0 && (kind == FaultKind::kPsDropPush || kind == FaultKind::kPsApplyTwice))
    return run.world - run.servers;
  if (kind == FaultKind::kPsStalePull) return 1;
  if (kind == FaultKind::kZbDropW || kind == FaultKind::kZbRepeatW) {
    const auto w = std::find(run.weight_passes.begin(), run.weight_passes.end(), true);
    return w == run.weight_passes.end() ? 0 : static_cast<int>(w - run.weight_passes.begin());
  }
  return 0;
}

namespace {

using Refuse = std::function<Status(const std::string&)>;

// On a parameter-server run: the parameter-server faults at a server (or, for ps-stale-pull, a worker after the
// first), the faults on a worker's micro-batches at a worker, the job-wide ones as they are; the all-reduce
// faults refused (docs/faults.md §"Parameter server").
Status check_on_parameter_server(const FaultSpec& f, const FaultTarget& run, const Refuse& refuse) {
  const int64_t steps = run.steps, staleness = run.staleness;
  const int world = run.world, servers = run.servers, workers = world - servers;
  switch (f.kind) {
    case FaultKind::kPsDropPush:
    case FaultKind::kPsApplyTwice:
      if (f.rank < workers)
        return refuse(fmt::format("rank {} is a worker; the servers are ranks {}–{}", f.rank, workers, world - 1));
      break;
    case FaultKind::kPsStalePull:
      if (workers < 2) return refuse("one worker: there is no other replica to compare it with");
      if (f.rank < 1 || f.rank >= workers)
        return refuse(
            fmt::format("rank {} is not a worker ≥ 1 (workers are ranks 0–{}; worker 0 is the replicas' "
                        "reference)",
                        f.rank, workers - 1));
      if (f.step + 1 >= steps) return refuse(fmt::format("no step follows step {}", f.step));
      if (staleness > 0 && !comm::refreshes_after(f.step, f.rank, staleness)) {
        int64_t next = f.step + 1;
        while (next + 1 < steps && !comm::refreshes_after(next, f.rank, staleness)) ++next;
        return refuse(
            fmt::format("under staleness {} worker {} keeps its cache after step {} by schedule (it "
                        "refreshes after step {})",
                        staleness, f.rank, f.step, next));
      }
      break;
    case FaultKind::kStaleGrad:
    case FaultKind::kWrongLossScale:
    case FaultKind::kDataOrder:
    case FaultKind::kNanInjection:
      if (f.rank >= workers)
        return refuse(fmt::format("rank {} is a parameter server: it runs no micro-batch (workers are ranks 0–{})",
                                  f.rank, workers - 1));
      break;
    case FaultKind::kDesyncExtraCollective:
    case FaultKind::kRankCrash:
    case FaultKind::kCkptBitflip:
    case FaultKind::kCkptTruncate:
    case FaultKind::kCkptMissingShard:
      break;
    default:
      return invalid_argument(
                 "fault {} cannot act on a parameter-server run (parallel.servers = {}): it breaks an all-reduce "
                 "mechanism (a dp all-reduce, tensor or pipeline parallelism, ZeRO-3) that such a run does not have",
                 f.to_string(), servers)
          .with_hint("the parameter-server faults are ps-drop-push, ps-stale-pull, ps-apply-twice");
  }
  return Status();
}

// What the fault's mechanism needs of the run: a dp, tp or pp group, sequence parallelism, ZeRO-3, two
// micro-batches, a previous step.
Status check_mechanism_present(const FaultSpec& f, const FaultTarget& run, const Refuse& refuse) {
  const auto [dp, tp, pp, zero, world, servers, staleness, steps, micro_batches, every, sequence_parallel,
              weight_passes] = run;
  switch (f.kind) {
    case FaultKind::kSkipGradAllreduce:
      if (dp < 2) return refuse("dp = 1");
      break;
    case FaultKind::kStaleGrad:
      if (f.step < 1) return refuse("step 0 has no previous gradient");
      break;
    case FaultKind::kWrongLossScale:
      if (micro_batches < 2) return refuse("one micro-batch per step");
      break;
    case FaultKind::kDropTpAllreduce:
    case FaultKind::kTpGradScale:
      if (tp < 2) return refuse("tp = 1");
      break;
    case FaultKind::kDropSpNormGradReduce:
      if (tp < 2 || !sequence_parallel)
        return refuse(fmt::format("tp = {}, sequence_parallel = {}", tp, sequence_parallel));
      break;
    case FaultKind::kZbDropW:
    case FaultKind::kZbRepeatW:
      if (std::find(weight_passes.begin(), weight_passes.end(), true) == weight_passes.end())
        return refuse("parallel.schedule is not \"zb-h1\" (no W pass)");
      if (!weight_passes[static_cast<size_t>(f.rank)])
        return refuse(
            fmt::format("rank {} is on the first pipeline stage, which runs W(k) right after B(k) as one "
                        "full backward (no W pass of its own); the ranks with W passes are the pipeline "
                        "ranks ≥ 1",
                        f.rank));
      break;
    case FaultKind::kPpMicrobatchSwap:
      if (pp < 2) return refuse("pp = 1");
      if (micro_batches / dp < 2) return refuse("fewer than 2 micro-batches per dp rank");
      break;
    case FaultKind::kZero3StaleParam:
      if (zero != 3 || dp < 2) return refuse(fmt::format("zero = {}, dp = {}", zero, dp));
      if (f.step < 1) return refuse("step 0 has no previous parameters");
      break;
    case FaultKind::kDesyncExtraCollective:
    case FaultKind::kRankCrash:
      if (world < 2) return refuse("world size 1");
      break;
    default:
      break;
  }
  return Status();
}

}  // namespace

Status check_fault_applicable(const FaultSpec& f, const FaultTarget& run) {
  if (!f.any()) return Status();
  const auto [dp, tp, pp, zero, world, servers, staleness, steps, micro_batches, every, sequence_parallel,
              weight_passes] = run;
  const FaultInfo& i = fault_info(f.kind);
  const Refuse refuse = [&](const std::string& why) -> Status {
    return invalid_argument("fault {} cannot act on this run: {}", f.to_string(), why)
        .with_hint(fmt::format("{} needs {}", i.name, i.needs));
  };
  if (f.step >= steps)
    return invalid_argument("fault {} cannot act on this run: step {} ≥ train.steps = {}", f.to_string(), f.step, steps)
        .with_hint(fmt::format("--fault {}@STEP with STEP in 0 … {} (steps count from 0), or a longer train.steps",
                               i.name, steps - 1));
  if (f.rank >= world)
    return invalid_argument("fault {} cannot act on this run: rank {} ≥ world size {}", f.to_string(), f.rank, world)
        .with_hint(fmt::format("--fault {}[@STEP]:RANK with RANK in 0 … {}", i.name, world - 1));
  // The parameter-server faults need servers; on a parameter-server run the faults that act on a worker's
  // micro-batches or on the job apply as they are, the all-reduce ones do not (docs/faults.md §"Parameter server").
  const bool ps_fault =
      f.kind == FaultKind::kPsDropPush || f.kind == FaultKind::kPsStalePull || f.kind == FaultKind::kPsApplyTwice;
  if (ps_fault && servers == 0) return refuse("an all-reduce run (no parameter server)");
  if (servers > 0) SP_RETURN_IF_ERROR(check_on_parameter_server(f, run, refuse));
  SP_RETURN_IF_ERROR(check_mechanism_present(f, run, refuse));
  if (is_checkpoint_fault(f.kind) && (every <= 0 || (f.step + 1) % every != 0))
    return invalid_argument(
               "fault {} damages the checkpoint saved after step {}, but this run saves none then "
               "(evidence.checkpoint_every = {})",
               f.to_string(), f.step, every)
        .with_hint(fmt::format("--set evidence.checkpoint_every={}", f.step + 1));
  return Status();
}

Status damage_checkpoint(const FaultSpec& fault, const std::string& step_dir) {
  namespace fs = std::filesystem;
  const std::string shard = ckpt::CheckpointPaths::shard_in(step_dir, fault.rank);
  std::error_code ec;
  if (!fs::exists(shard, ec)) {
    log_warn("fault {}: '{}' does not exist (rank {} saved no shard); nothing damaged", fault.to_string(), shard,
             fault.rank);
    return Status();
  }
  const uint64_t size = fs::file_size(shard, ec);
  if (ec) return io_error("fault {}: cannot stat '{}': {}", fault.to_string(), shard, ec.message());
  switch (fault.kind) {
    case FaultKind::kCkptBitflip: {
      // One bit in the middle of the file: in the tensor data, past the safetensors header.
      SP_ASSIGN_OR_RETURN(std::string bytes, read_file(shard));
      bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
      SP_RETURN_IF_ERROR(write_file(shard, bytes));
      break;
    }
    case FaultKind::kCkptTruncate:
      fs::resize_file(shard, size - 1, ec);
      break;
    case FaultKind::kCkptMissingShard:
      fs::remove(shard, ec);
      break;
    default:
      return Status();
  }
  if (ec) return io_error("fault {}: cannot damage '{}': {}", fault.to_string(), shard, ec.message());
  log_warn("fault {}: damaged '{}'", fault.to_string(), shard);
  return Status();
}

}  // namespace sp::evidence
