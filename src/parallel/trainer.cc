#include "parallel/trainer.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "ckpt/consolidated.h"
#include "ckpt/names.h"
#include "comm/topology.h"
#include "comm/trace_writer.h"
#include "comm/traced_communicator.h"
#include "comm/watchdog.h"
#include "core/check.h"
#include "core/file_io.h"
#include "core/log.h"
#include "core/timer.h"
#include "evidence/activations.h"
#include "data/prepare.h"
#include "data/token_dataset.h"
#include "evidence/contract.h"
#include "evidence/ledger_model.h"
#include "evidence/ledger_report.h"
#include "parallel/agree.h"
#include "parallel/checkpointing.h"
#include "parallel/comm_model.h"
#include "parallel/engine.h"

namespace sp::parallel {
namespace {

std::string resolve(const std::string& root, const std::string& path) {
  return std::filesystem::path(path).is_absolute() ? path : (std::filesystem::path(root) / path).string();
}

std::string eta_string(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  return fmt::format("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
}

}  // namespace

// Refuses a fault this run cannot express, identically on every rank before any communication.
Status check_fault_for_run(const evidence::FaultSpec& fault, const RunConfig& config, const Plan& plan) {
  const ParallelConfig& pc = config.parallel;
  SP_RETURN_IF_ERROR(evidence::check_fault_applicable(fault, pc.dp, pc.tp, pc.pp, pc.zero, pc.world(),
                                                      config.train.steps, plan.micro_batches));
  const bool ckpt_fault = fault.kind == evidence::FaultKind::kCkptBitflip ||
                          fault.kind == evidence::FaultKind::kCkptTruncate ||
                          fault.kind == evidence::FaultKind::kCkptMissingShard;
  const int64_t every = config.evidence.checkpoint_every;
  if (ckpt_fault && (every <= 0 || (fault.step + 1) % every != 0))
    return invalid_argument("fault {} damages the checkpoint saved after step {}, but this run saves none then "
                            "(evidence.checkpoint_every = {})", fault.to_string(), fault.step, every)
        .with_hint(fmt::format("--set evidence.checkpoint_every={}", fault.step + 1));
  return Status();
}

// ckpt-bitflip / ckpt-truncate / ckpt-missing-shard: damage world rank `fault.rank`'s shard of a
// committed checkpoint, as a disk or a careless operator would; the checkpoint view must notice.
void damage_checkpoint(const evidence::FaultSpec& fault, const std::string& step_dir) {
  namespace fs = std::filesystem;
  const std::string shard = ckpt::CheckpointPaths::shard_in(step_dir, fault.rank);
  std::error_code ec;
  if (!fs::exists(shard, ec)) {
    log_warn("fault {}: '{}' does not exist (rank {} saved no shard); nothing damaged", fault.to_string(), shard,
             fault.rank);
    return;
  }
  switch (fault.kind) {
    case evidence::FaultKind::kCkptBitflip: {
      std::FILE* f = std::fopen(shard.c_str(), "r+b");
      if (f == nullptr) return;
      const auto size = static_cast<long>(fs::file_size(shard, ec));
      std::fseek(f, size / 2, SEEK_SET);  // in the tensor data, past the safetensors header
      const int byte = std::fgetc(f);
      std::fseek(f, size / 2, SEEK_SET);
      std::fputc(byte ^ 0x10, f);
      std::fclose(f);
      break;
    }
    case evidence::FaultKind::kCkptTruncate: fs::resize_file(shard, fs::file_size(shard, ec) - 1, ec); break;
    case evidence::FaultKind::kCkptMissingShard: fs::remove(shard, ec); break;
    default: return;
  }
  log_warn("fault {}: damaged '{}'", fault.to_string(), shard);
}

// --expect-contract: this run must be the frozen contract's run, up to the topology and evidence
// settings (the reference and the parallel stage differ only there; docs/prove.md).
Status check_expected_contract(const std::string& path, const nlohmann::json& contract) {
  SP_ASSIGN_OR_RETURN(const std::string text, read_file(path, uint64_t{1} << 26));
  const nlohmann::json frozen = nlohmann::json::parse(text, nullptr, false);
  if (frozen.is_discarded()) return corrupt("frozen contract '{}' is not JSON", path);
  SP_RETURN_IF_ERROR(evidence::verify_contract(frozen, path));
  const std::vector<std::string> diffs = evidence::contract_diff(frozen, contract, stage_contract_differences());
  if (diffs.empty()) return Status();
  std::string lines;
  for (const std::string& d : diffs) lines += "\n    " + d;
  return failed_precondition("this run's contract differs from the frozen contract '{}' (frozen ≠ this run):{}", path,
                             lines)
      .with_hint("a proof's stages must share one contract: same build, config, data and seed; rerun the whole "
                 "protocol if any of them changed");
}

const std::vector<std::string>& stage_contract_differences() {
  static const std::vector<std::string> keys = {"hash", "world_size", "config.parallel", "config.evidence", "config.prove"};
  return keys;
}

Result<TrainSummary> run_training(const RunConfig& config, const TrainOptions& opt, comm::MpiScope& mpi) {
  // 1. Validate everything before any communication (identical on every rank: pure functions of the config).
  SP_ASSIGN_OR_RETURN(Plan plan, Plan::make(config, mpi.world_size()));
  const ParallelConfig& pc = config.parallel;
  SP_RETURN_IF_ERROR(check_fault_for_run(opt.fault, config, plan));
  SP_ASSIGN_OR_RETURN(comm::ProcessGrid grid, comm::ProcessGrid::create(pc.dp, pc.tp, pc.pp, pc.axis_order,
                                                                          mpi.world_size()));
  const int rank = mpi.world_rank();
  set_log_rank(rank, grid.coords_of(rank).to_string());

  comm::GridCommunicators comms = comm::make_grid_communicators(grid);
  comm::TraceContext trace;

  // 2. Output directory (rank 0 creates, everyone agrees on the result).
  SP_RETURN_IF_ERROR(agree(*comms.world, rank == 0 ? make_directories(opt.out_dir) : Status()));

  // 3. Data: rank 0 prepares (content-addressed cache), then every rank opens and verifies it.
  const std::string cache = opt.cache_dir.empty() ? resolve(opt.root_dir, ".shardproof-cache") : opt.cache_dir;
  data::PrepareOptions popt;
  popt.sources_file = resolve(opt.root_dir, config.data.sources);
  popt.vocab_size = config.data.vocab_size;
  popt.eval_fraction = config.data.eval_fraction;
  popt.seed = config.data.seed;
  std::string prepared_dir;
  {
    Status st;
    if (rank == 0) {
      auto r = data::prepare_cached(popt, cache);
      if (r.ok()) prepared_dir = r->dir; else st = r.status();
    }
    SP_RETURN_IF_ERROR(agree(*comms.world, st));
    prepared_dir = broadcast_string(*comms.world, prepared_dir);
  }
  auto train_ds = data::TokenDataset::open(prepared_dir, data::Split::kTrain);
  auto eval_ds = data::TokenDataset::open(prepared_dir, data::Split::kEval);
  SP_RETURN_IF_ERROR(agree(*comms.world, !train_ds.ok() ? train_ds.status() : eval_ds.status()));
  {
    auto loader_ok = data::Loader::validate(*train_ds, {config.train.micro_batch_size, config.train.seq_len,
                                                        plan.micro_batches, config.train.seed});
    SP_RETURN_IF_ERROR(agree(*comms.world, loader_ok));
  }

  nlohmann::json contract = evidence::make_contract(
      {config.to_json(), nlohmann::json(data::identity_to_json(train_ds->identity())), mpi.library_version(), mpi.world_size()});
  // The proof protocol's stages run under one frozen contract (docs/prove.md).
  if (!opt.expect_contract.empty()) SP_RETURN_IF_ERROR(agree(*comms.world, check_expected_contract(opt.expect_contract, contract)));
  if (opt.contract_only) {
    SP_RETURN_IF_ERROR(agree(*comms.world, rank == 0 ? write_file_atomic(opt.out_dir + "/contract.json", contract.dump(2) + "\n")
                                                     : Status()));
    return TrainSummary{};
  }
  // -- checkpoints: choose and verify the checkpoint to resume from before any evidence file opens --
  SP_ASSIGN_OR_RETURN(const ResumePlan resume, plan_resume(*comms.world, opt.out_dir, contract, opt.resume));
  if (resume.resume) SP_RETURN_IF_ERROR(prepare_evidence_for_resume(*comms.world, opt.out_dir, resume));
  // -- end checkpoints --

  // 4. Tracing and the watchdog wrap every communicator from here on.
  std::unique_ptr<comm::TraceWriter> writer;
  if (config.evidence.trace) {
    auto w = comm::TraceWriter::open(opt.out_dir, rank);
    SP_RETURN_IF_ERROR(agree(*comms.world, w.status()));
    writer = std::move(w).value();
  }
  comm::Watchdog watchdog(config.evidence.watchdog_seconds, writer.get());
  // A failed check inside a collective (an MPI error, a desync) leaves the op it died in in the trace.
  set_before_fatal([&watchdog] { watchdog.record_aborted(); });
  struct ResetBeforeFatal {
    ~ResetBeforeFatal() { set_before_fatal({}); }
  } reset_before_fatal;
  auto wrap = [&](std::unique_ptr<comm::Communicator>& c) {
    c = std::make_unique<comm::TracedCommunicator>(std::move(c), trace, writer.get(), &watchdog);
  };
  wrap(comms.world);
  wrap(comms.dp);
  wrap(comms.tp);
  wrap(comms.pp);

  SP_RETURN_IF_ERROR(comm::write_topology(*comms.world, grid, opt.out_dir));
  if (rank == 0) {
    // The communication every rank must issue, predicted from the plan (comm_model.h); `trace check`
    // compares the traces with it.
    nlohmann::json predicted = {{"format_version", 1}, {"ranks", nlohmann::json::array()}};
    for (int r = 0; r < grid.world_size(); ++r) predicted["ranks"].push_back(predict_run_traffic_for_rank(plan, grid, r));
    SP_RETURN_IF_ERROR(write_file_atomic(opt.out_dir + "/comm_predicted.json", predicted.dump() + "\n"));
    SP_RETURN_IF_ERROR(write_file_atomic(opt.out_dir + "/contract.json", contract.dump(2) + "\n"));
  }

  auto timeline = Timeline::open(opt.out_dir, rank);
  SP_RETURN_IF_ERROR(agree(*comms.world, timeline.status()));
  std::optional<evidence::ChecksumWriter> checksums;
  std::FILE* metrics = nullptr;
  std::optional<EvidenceTail> checksum_tail;  // checkpoints: a resumed run appends to checksums.jsonl
  if (rank == 0) {
    if (resume.resume) checksum_tail.emplace(opt.out_dir + "/.checksums.resumed.jsonl", opt.out_dir + "/checksums.jsonl");
    auto cw = evidence::ChecksumWriter::open(checksum_tail ? checksum_tail->scratch() : opt.out_dir + "/checksums.jsonl");
    if (cw.ok()) checksums.emplace(std::move(cw).value());
    metrics = std::fopen((opt.out_dir + "/metrics.jsonl").c_str(), resume.resume ? "a" : "w");
  }
  SP_RETURN_IF_ERROR(agree(*comms.world, rank == 0 && (!checksums || metrics == nullptr)
                                             ? io_error("cannot create checksums.jsonl/metrics.jsonl in '{}'", opt.out_dir)
                                             : Status()));
  auto write_metrics = [&](const nlohmann::json& j) {
    if (metrics == nullptr) return;
    const std::string line = j.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), metrics);
    std::fflush(metrics);
  };

  // -- activation digests: rank 0 clears old records (a resumed run keeps steps < its resume step), then
  // every rank opens activations/rank-NNNNN.jsonl when evidence.activation_digests is on --
  SP_RETURN_IF_ERROR(agree(*comms.world, rank == 0 ? evidence::prepare_activation_dir(opt.out_dir, resume.step)
                                                   : Status()));
  std::unique_ptr<evidence::ActivationRecorder> activations;
  if (config.evidence.activation_digests) {
    auto a = evidence::ActivationRecorder::open(opt.out_dir, rank, grid.coords_of(rank).tp, pc.tp);
    SP_RETURN_IF_ERROR(agree(*comms.world, a.status()));
    activations = std::move(a).value();
  }
  // -- end activation digests --

  // 5. Train.
  MemoryLedger ledger;
  TrainSummary summary;
  Status failure;
  {
    Engine engine(plan, grid, comms, trace, ledger, &*train_ds, &*eval_ds, &*timeline);
    engine.initialize();
    engine.set_fault(opt.fault);
    engine.set_activation_recorder(activations.get());  // -- activation digests --
    // -- checkpoints: resume (any topology), or start from consolidated weights --
    if (resume.resume) {
      SP_RETURN_IF_ERROR(load_checkpoint(engine, *comms.world, trace, resume));
      if (rank == 0 && !opt.init_from.empty())
        log_warn("--init-from '{}' ignored: the run resumes from its checkpoint (step {})", opt.init_from, resume.step);
    } else if (!opt.init_from.empty()) {
      auto weights = ckpt::read_consolidated(opt.init_from, config.model);
      SP_RETURN_IF_ERROR(agree(*comms.world, weights.status()));
      engine.set_parameters([&](const std::string& name) { return weights->at(name).data(); });
      if (rank == 0) log_info("initialized from consolidated weights '{}'", opt.init_from);
    }
    summary.initial_eval_loss = std::nan("");  // a resumed run took it before its checkpoint
    if (!resume.resume) {
      summary.initial_eval_loss = engine.evaluate(-1);
      write_metrics({{"step", -1}, {"eval_loss", summary.initial_eval_loss}});
    }
    CheckpointOptions ckpt_options;
    ckpt_options.keep_last = config.evidence.keep_last;
    ckpt_options.fault = opt.ckpt_fault;
    const int64_t first_step = resume.step;
    const int64_t last_step = opt.stop_after > 0 ? std::min(opt.stop_after, config.train.steps) : config.train.steps;
    // -- end checkpoints --
    const int64_t steps = config.train.steps;
    const double tokens_per_step = static_cast<double>(config.train.global_batch * config.train.seq_len);
    Stopwatch run_clock;
    double tokens_seen = 0;
    for (int64_t s = first_step; s < last_step; ++s) {
      const bool take = config.evidence.checksum_every > 0 && s % config.evidence.checksum_every == 0;
      StepResult r = engine.step(s, take);
      tokens_seen += tokens_per_step;
      Stopwatch record_clock;  // step_s includes writing this step's checksum records
      if (checksums) {
        checksums->write_scalar(s, "loss", "loss", r.loss);
        if (take) {
          checksums->write_tensors(s, "grad", engine.tensors(), r.grads);
          checksums->write_tensors(s, "param", engine.tensors(), r.params);
        }
        checksums->flush();
        if (checksum_tail)
          if (Status st = checksum_tail->pump(); !st.ok()) log_warn("{}", st.message());
      }
      r.seconds += record_clock.seconds();
      nlohmann::json m = {{"step", s},          {"loss", r.loss},       {"lr", r.lr},
                          {"grad_norm", r.grad_norm}, {"clip", r.clip}, {"finite", r.finite},
                          {"skipped", r.skipped}, {"step_s", r.seconds}, {"compute_s", r.compute_seconds},
                          {"tokens_per_s", tokens_per_step / r.seconds}};
      if (!r.diverging_ranks.empty()) m["diverging_ranks"] = r.diverging_ranks;
      const bool last = s + 1 == steps;
      if ((config.train.eval_every > 0 && (s + 1) % config.train.eval_every == 0) || last) {
        const double ev = engine.evaluate(s);
        m["eval_loss"] = ev;
        summary.final_eval_loss = ev;
      }
      write_metrics(m);
      summary.final_loss = r.loss;
      summary.steps = s + 1;
      if (rank == 0 && opt.progress) {
        const double elapsed = run_clock.seconds();
        log_info("step {}/{} loss {:.4f} lr {:.2e} norm {:.3f} | {:.0f} tok/s | ETA {}", s + 1, steps, r.loss, r.lr,
                 r.grad_norm, tokens_seen / elapsed, eta_string(elapsed / static_cast<double>(s + 1 - first_step) *
                                                                static_cast<double>(steps - s - 1)));
      }
      if (!r.diverging_ranks.empty() && config.evidence.stop_on_divergence) {
        failure = failed_precondition("step {}: dp replicas diverged: world rank(s) {} hold parameters that differ "
                                      "from their dp group's rank 0",
                                      s, fmt::join(r.diverging_ranks, ", "));
        break;
      }
      if (!r.finite && config.evidence.stop_on_divergence) {
        failure = failed_precondition("step {}: non-finite gradients (norm {}); no update was applied", s,
                                      r.grad_norm);
        break;
      }
      // -- checkpoints: save after every checkpoint_every healthy steps --
      if (config.evidence.checkpoint_every > 0 && (s + 1) % config.evidence.checkpoint_every == 0) {
        auto saved = save_checkpoint(engine, *comms.world, trace, opt.out_dir, s + 1, contract, ckpt_options);
        if (!saved.ok()) {
          failure = saved.status();
          break;
        }
        if (rank == 0)
          log_info("checkpoint step {}: {} ({:.1f} MB, {:.2f} s){}", s + 1, saved->dir, saved->bytes / 1e6,
                   saved->seconds, saved->deleted.empty() ? "" : fmt::format("; removed step {}", fmt::join(saved->deleted, ", ")));
        if (rank == 0 && opt.fault.step == s) damage_checkpoint(opt.fault, saved->dir);
      }
      // -- end checkpoints --
    }
    summary.tokens_per_second = tokens_seen / run_clock.seconds();
    // 6. Ledger: measured (every rank) and predicted, gathered to rank 0 while everything is live.
    nlohmann::json mine = evidence::compare_ledger(ledger, evidence::predict_ledger(engine.ledger_input()));
    mine["rank"] = rank;
    mine["coords"] = grid.coords_of(rank).to_string();
    SP_RETURN_IF_ERROR(evidence::write_ledger_report(*comms.world, mine, config.evidence.memory_budget_mb, opt.out_dir));
  }
  if (metrics != nullptr) std::fclose(metrics);
  if (writer) SP_RETURN_IF_ERROR(agree(*comms.world, writer->status()));
  if (activations) SP_RETURN_IF_ERROR(agree(*comms.world, activations->status()));  // -- activation digests --
  SP_RETURN_IF_ERROR(failure);
  return summary;
}

}  // namespace sp::parallel
