#include "parallel/trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>

#include "ckpt/hf_weights.h"
#include "comm/agree.h"
#include "comm/staleness.h"
#include "comm/topology.h"
#include "comm/trace_writer.h"
#include "comm/traced_communicator.h"
#include "comm/watchdog.h"
#include "core/check.h"
#include "core/dir_lock.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "core/log.h"
#include "core/timer.h"
#include "data/bpe_train.h"
#include "data/prepare.h"
#include "data/token_dataset.h"
#include "evidence/activations.h"
#include "evidence/bundle_paths.h"
#include "evidence/checksums.h"
#include "evidence/contract.h"
#include "evidence/ledger_report.h"
#include "evidence/run_dir.h"
#include "parallel/engine.h"
#include "parallel/memory_fit.h"
#include "parallel/parameter_server.h"
#include "plan/ledger_model.h"
#include "plan/run_plan.h"
#include "plan/traffic_model.h"

namespace sp::parallel {
namespace {

std::string resolve(const std::string& root, const std::string& path) {
  return std::filesystem::path(path).is_absolute() ? path : (std::filesystem::path(root) / path).string();
}

std::string eta_string(double seconds) {
  const auto s = static_cast<int64_t>(std::max(0.0, seconds));
  return fmt::format("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60);
}

// Removes the fatal-error hook when the run ends (installed by open_evidence).
struct BeforeFatalReset {
  ~BeforeFatalReset() { set_before_fatal({}); }
};

// Everything one rank holds between the phases of a run. Members are destroyed in reverse order: the
// engine first, then the communicators (which point at the trace writer and the watchdog), then the
// evidence files.
// What validation fixes before anything else happens: the plan and the process grid.
struct Setup {
  plan::RunPlan plan;
  comm::ProcessGrid grid;
};

struct Run {
  Run(const config::RunConfig& c, const TrainOptions& o, Setup s, int r)
      : config(c), opt(o), paths(o.out_dir), plan(std::move(s.plan)), grid(std::move(s.grid)), rank(r) {}
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  const config::RunConfig& config;
  const TrainOptions& opt;
  const evidence::RunPaths paths;
  const plan::RunPlan plan;
  const comm::ProcessGrid grid;
  const int rank;
  DirectoryLock dir_lock;  // rank 0: the output directory is this run's until it ends (evidence/run_dir.h)
  // 2. prepare_data
  std::optional<data::TokenDataset> train, eval;
  nlohmann::json contract;
  // 3. open_evidence
  ResumePlan resume;
  std::unique_ptr<comm::TraceWriter> trace_writer;
  std::unique_ptr<comm::Watchdog> watchdog;
  BeforeFatalReset before_fatal_reset;
  std::optional<Timeline> timeline;
  std::optional<evidence::ChecksumWriter> checksums;  // world rank 0
  std::optional<JsonlWriter> metrics;                 // world rank 0
  std::unique_ptr<evidence::ActivationRecorder> activations;
  comm::GridCommunicators comms;
  comm::TraceContext trace;
  MemoryLedger ledger;
  // 4. initialize_or_resume
  std::unique_ptr<Engine> engine;
  std::optional<ckpt::NamedTensors> init_weights;  // --init-from, read and checked in prepare_data

  Status agree(const Status& local) { return comm::agree(*comms.world, local); }
  // The first write error of this rank's evidence files (each writer keeps its own, naming its file).
  // Every file that failed is named.
  Status evidence_status() const {
    Status out;
    for (const Status& s : {trace_writer ? trace_writer->status() : Status(), timeline ? timeline->status() : Status(),
                            checksums ? checksums->status() : Status(), metrics ? metrics->status() : Status(),
                            activations ? activations->status() : Status()})
      if (!s.ok()) out = out.ok() ? s : Status(out.code(), out.message() + "; " + s.message());
    return out;
  }
  Status on_rank0(const std::function<Status()>& f) { return agree(rank == 0 ? f() : Status()); }
  void write_metrics(const nlohmann::json& record) {
    if (!metrics) return;
    metrics->write(record);
    (void)metrics->flush();  // an error is kept and reported by finish()
  }
};

// The run options that only make sense together (the anchored replay, extra checkpoints).
Status validate_options(const config::RunConfig& config, const TrainOptions& opt) {
  const int64_t steps = config.train.steps;
  for (int64_t s : opt.checkpoint_at)
    if (s < 0 || s > steps)
      return invalid_argument("--checkpoint-at {}: a checkpoint holds the state after 0 … train.steps = {} steps", s,
                              steps);
  if (opt.anchor_from.empty()) {
    if (!opt.anchors.empty() || !opt.anchor_evals.empty())
      return invalid_argument("--anchors and --anchor-evals need --anchor-from REFERENCE_RUN");
    return Status();
  }
  if (!opt.anchor_evals.empty() && config.train.eval_batches == 0)
    return invalid_argument("--anchor-evals with train.eval_batches = 0: there is no held-out split to evaluate");
  for (size_t i = 0; i < opt.anchor_evals.size(); ++i)
    if (opt.anchor_evals[i] < -1 || opt.anchor_evals[i] >= steps ||
        (i > 0 && opt.anchor_evals[i] <= opt.anchor_evals[i - 1]))
      return invalid_argument("--anchor-evals: {} is not an increasing step in [−1, train.steps = {})",
                              opt.anchor_evals[i], steps);
  if (opt.anchors.empty()) return invalid_argument("--anchor-from needs --anchors STEP,STEP,...");
  if (opt.resume.mode == ResumeMode::kRequired || opt.stop_after > 0 || !opt.init_from.empty() ||
      config.evidence.checkpoint_every > 0 || !opt.checkpoint_at.empty())
    return invalid_argument(
               "an anchored replay (--anchor-from) loads its state at every anchor: it cannot also "
               "resume, stop early, start from --init-from or save checkpoints")
        .with_hint("drop --resume required, --stop-after, --init-from, --checkpoint-at and evidence.checkpoint_every");
  for (size_t i = 0; i < opt.anchors.size(); ++i) {
    const int64_t a = opt.anchors[i];
    if (a < opt.anchor_warmup || a >= steps)
      return invalid_argument("--anchors: step {} must lie in [warmup = {}, train.steps = {})", a, opt.anchor_warmup,
                              steps);
    if (i > 0 && a <= opt.anchors[i - 1])
      return invalid_argument("--anchors must be increasing ({} after {})", a, opt.anchors[i - 1]);
  }
  return Status();
}

}  // namespace

Result<plan::RunPlan> plan_run(const config::RunConfig& config, int world) {
  SP_ASSIGN_OR_RETURN(plan::RunPlan plan, plan::RunPlan::make(config, world));
  // The vocabulary is the tokenizer `data prepare` trains: refused here, before --out is claimed.
  if (Status v = data::validate_vocab_size(config.data.vocab_size); !v.ok())
    return Status(v.code(),
                  config.model_config.is_object() && config.model_config.contains("file")
                      ? fmt::format("\"vocab_size\" in '{}' (model.vocab_size and data.vocab_size): {}",
                                    config.model_config["file"].get<std::string>(), v.message())
                      : fmt::format("data.vocab_size: {}", v.message()),
                  v.hint());
  return plan;
}

namespace {

// 1. Validate and plan: every rule, identically on every rank, before any communication or file write.
Result<Setup> validate_and_plan(const config::RunConfig& config, const TrainOptions& opt, comm::MpiScope& mpi) {
  SP_RETURN_IF_ERROR(validate_options(config, opt));
  SP_ASSIGN_OR_RETURN(plan::RunPlan plan, plan_run(config, mpi.world_size()));
  SP_RETURN_IF_ERROR(evidence::check_fault_applicable(opt.fault, plan.fault_target()));
  const config::ParallelConfig& pc = config.parallel;
  // The grid is the workers' (every rank under all-reduce; the servers are extra ranks, comm/roles.h).
  SP_ASSIGN_OR_RETURN(comm::ProcessGrid grid,
                      comm::ProcessGrid::create(pc.dp, pc.tp, pc.pp, pc.axis_order, pc.workers()));
  set_log_rank(mpi.world_rank(), plan.roles().label(mpi.world_rank(), grid));
  return Setup{std::move(plan), std::move(grid)};
}

// 2. Prepare the data and freeze the contract: rank 0 prepares the corpus into the content-addressed
//    cache, every rank opens and verifies it; the contract binds config, data, build and versions.
Status prepare_data(Run& run, comm::MpiScope& mpi) {
  const config::RunConfig& config = run.config;
  run.comms = config.parallel.parameter_server() ? comm::make_ps_communicators(run.grid, run.plan.roles())
                                                 : comm::make_grid_communicators(run.grid);
  // --init-from is read and checked on every rank before anything is written: a file that does not fit
  // the model is a usage error that leaves --out untouched.
  if (!run.opt.init_from.empty()) {
    auto weights = ckpt::read_hf_weights(run.opt.init_from, config.model);
    SP_RETURN_IF_ERROR(run.agree(weights.status()));
    run.init_weights.emplace(std::move(weights).value());
  }
  // Nothing is written before the output directory is claimed: locked, and refused if it holds
  // another run (or cleared, under --overwrite).
  SP_RETURN_IF_ERROR(run.on_rank0([&]() -> Status {
    SP_ASSIGN_OR_RETURN(
        run.dir_lock,
        evidence::claim_run_dir(run.opt.out_dir, {.overwrite = run.opt.overwrite,
                                                  .resume_required = run.opt.resume.mode == ResumeMode::kRequired,
                                                  .contract_only = run.opt.contract_only}));
    return Status();
  }));
  data::PrepareOptions popt;
  popt.sources_file = resolve(run.opt.root_dir, config.data.sources);
  popt.vocab_size = config.data.vocab_size;
  popt.eval_fraction = config.data.eval_fraction;
  popt.seed = config.data.seed;
  const std::string cache =
      run.opt.cache_dir.empty() ? resolve(run.opt.root_dir, ".shardproof-cache") : run.opt.cache_dir;
  std::string prepared_dir;
  SP_RETURN_IF_ERROR(run.on_rank0([&]() -> Status {
    SP_ASSIGN_OR_RETURN(const data::PrepareSummary prepared, data::prepare_cached(popt, cache));
    prepared_dir = prepared.dir;
    return Status();
  }));
  prepared_dir = comm::broadcast_string(*run.comms.world, prepared_dir);
  auto train = data::TokenDataset::open(prepared_dir, data::Split::kTrain);
  auto eval = data::TokenDataset::open(prepared_dir, data::Split::kEval);
  SP_RETURN_IF_ERROR(run.agree(!train.ok() ? train.status() : eval.status()));
  run.train.emplace(std::move(train).value());
  run.eval.emplace(std::move(eval).value());
  SP_RETURN_IF_ERROR(run.agree(data::Loader::validate(
      *run.train, {config.train.micro_batch_size, config.train.seq_len, run.plan.micro_batches, config.train.seed})));
  // Every evaluation averages exactly train.eval_batches batches (the traffic and ledger predictions
  // assume them): a split with fewer, or with no token at all, is refused here, not reported as NaN.
  if (config.train.eval_batches > 0) {
    const Status eval_ok = data::EvalSet::validate(*run.eval, config.train.micro_batch_size, config.train.seq_len,
                                                   config.train.eval_batches);
    SP_RETURN_IF_ERROR(run.agree(eval_ok.ok() ? eval_ok
                                              : eval_ok.with_hint(eval_ok.hint() + " (train.eval_batches = " +
                                                                  std::to_string(config.train.eval_batches) +
                                                                  "; 0 trains without evaluation)")));
  }

  run.contract =
      evidence::make_contract({config.to_json(), nlohmann::json(data::identity_to_json(run.train->identity())),
                               mpi.library_version(), mpi.world_size(), gemm16_backend_name(run.plan)});
  // The proof protocol's stages run under one frozen contract (docs/prove.md).
  if (!run.opt.expect_contract.empty())
    SP_RETURN_IF_ERROR(run.agree(evidence::check_expected_contract(run.opt.expect_contract, run.contract)));
  if (run.opt.contract_only)
    return run.on_rank0([&] { return write_file_atomic(run.paths.contract(), run.contract.dump(2) + "\n"); });
  return Status();
}

// 3. Open the evidence. The checkpoint to resume from is chosen (and verified) first: it decides
//    whether the evidence files start anew or continue from its recorded prefix. From here on every
//    communicator is traced and watched.
Status open_evidence(Run& run) {
  const config::RunConfig& config = run.config;
  const std::string& out = run.opt.out_dir;
  const bool anchored = !run.opt.anchor_from.empty();
  if (!anchored) {
    SP_ASSIGN_OR_RETURN(run.resume, plan_resume(*run.comms.world, out, run.contract, run.opt.resume));
  }
  if (run.resume.resume) SP_RETURN_IF_ERROR(prepare_evidence_for_resume(*run.comms.world, out, run.resume));

  if (config.evidence.trace) {
    auto w = comm::TraceWriter::open(out, run.rank);
    SP_RETURN_IF_ERROR(run.agree(w.status()));
    run.trace_writer = std::move(w).value();
  }
  run.watchdog = std::make_unique<comm::Watchdog>(config.evidence.watchdog_seconds, run.trace_writer.get());
  // A failed check inside a collective (an MPI error, a desync) leaves the op it died in in the trace.
  set_before_fatal([w = run.watchdog.get()] { w->record_aborted(); });
  comm::trace_communicators(run.comms, run.trace, run.trace_writer.get(), run.watchdog.get());

  const std::optional<comm::PsTopology> ps = ps_topology(run.plan);
  SP_RETURN_IF_ERROR(comm::write_topology(*run.comms.world, run.grid, out, ps ? &*ps : nullptr));
  // The communication every rank must issue, predicted from the plan (comm_model.h); `trace check`
  // and the gate compare the traces with it. Rank 0's write errors reach every rank (no peer waits).
  // (An anchored replay runs only its anchors' steps: it has no prediction.)
  SP_RETURN_IF_ERROR(run.on_rank0([&]() -> Status {
    if (!anchored)
      SP_RETURN_IF_ERROR(
          write_file_atomic(run.paths.comm_predicted(), plan::predict_run_traffic(run.plan, run.grid).dump() + "\n"));
    return write_file_atomic(run.paths.contract(), run.contract.dump(2) + "\n");
  }));

  auto timeline = Timeline::open(out, run.rank);
  SP_RETURN_IF_ERROR(run.agree(timeline.status()));
  run.timeline.emplace(std::move(timeline).value());
  // A resumed run continues checksums.jsonl and metrics.jsonl, cut back to the checkpoint's prefix.
  const JsonlWriter::Mode mode = run.resume.resume ? JsonlWriter::Mode::kAppend : JsonlWriter::Mode::kTruncate;
  SP_RETURN_IF_ERROR(run.on_rank0([&]() -> Status {
    SP_ASSIGN_OR_RETURN(evidence::ChecksumWriter checksums,
                        evidence::ChecksumWriter::open(run.paths.checksums(), mode));
    SP_ASSIGN_OR_RETURN(JsonlWriter metrics, JsonlWriter::open(run.paths.metrics(), mode));
    run.checksums.emplace(std::move(checksums));
    run.metrics.emplace(std::move(metrics));
    return Status();
  }));

  // Activation digests: rank 0 clears old records (a resumed run keeps steps before its resume step),
  // then every rank opens its file.
  SP_RETURN_IF_ERROR(run.on_rank0([&] { return evidence::prepare_activation_dir(out, run.resume.step); }));
  if (config.evidence.activation_digests) {
    const int tp_rank = run.plan.roles().is_server(run.rank) ? 0 : run.grid.coords_of(run.rank).tp;
    auto a = evidence::ActivationRecorder::open(out, run.rank, tp_rank, config.parallel.tp);
    SP_RETURN_IF_ERROR(run.agree(a.status()));
    run.activations = std::move(a).value();
  }
  return Status();
}

// 4. Initialize or resume: the shard-invariant initialization from the seed, then the resumed
//    checkpoint (any topology) or consolidated weights; the armed fault; the initial evaluation.
Status initialize_or_resume(Run& run, TrainSummary& summary) {
  run.engine = std::make_unique<Engine>(run.plan, run.grid, run.comms, run.trace, run.ledger, &*run.train, &*run.eval,
                                        &*run.timeline);
  Engine& engine = *run.engine;
  engine.initialize();
  engine.set_fault(run.opt.fault);
  engine.set_activation_recorder(run.activations.get());
  if (run.resume.resume) {
    SP_RETURN_IF_ERROR(load_checkpoint(engine, *run.comms.world, run.trace, run.resume));
    if (run.rank == 0 && !run.opt.init_from.empty())
      log_warn("--init-from '{}' ignored: the run resumes from its checkpoint (step {})", run.opt.init_from,
               run.resume.step);
  } else if (run.init_weights) {
    engine.set_parameters([&](const std::string& name) { return run.init_weights->at(name).data(); });
    if (run.rank == 0) log_info("initialized from consolidated weights '{}'", run.opt.init_from);
  }
  run.init_weights.reset();
  summary.first_step = summary.steps = run.resume.step;
  if (!run.resume.resume && run.opt.anchor_from.empty()) {  // a resumed run took it before its checkpoint
    const double initial = engine.evaluate(-1);
    if (run.config.train.eval_batches > 0) summary.initial_eval_loss = initial;
    run.write_metrics({{"step", -1}, {"eval_loss", initial}});
  }
  return Status();
}

// The step's checksum records (loss always; gradients and parameters when taken) on rank 0.
void write_step_records(Run& run, const StepResult& r, bool take) {
  if (!run.checksums) return;
  run.checksums->write_scalar(r.step, "loss", "loss", r.loss);
  // fp16: the loss scaler's record, every step (proof::expected_records).
  if (run.config.train.precision.compute == DType::kF16) {
    SP_CHECK(r.loss_scale > 0, "step {}: an fp16 step without a loss scale", r.step);
    run.checksums->write_scaler(r.step, r.loss_scale, r.skipped);
  }
  if (take) {
    run.checksums->write_tensors(r.step, "grad", run.engine->tensors(), r.grads);
    run.checksums->write_tensors(r.step, "param", run.engine->tensors(), r.params);
  }
  (void)run.checksums->flush();  // an error is kept and reported by finish()
}

nlohmann::json step_metrics(const StepResult& r, double tokens_per_step) {
  nlohmann::json m = {{"step", r.step},
                      {"loss", r.loss},
                      {"lr", r.lr},
                      {"grad_norm", r.grad_norm},
                      {"clip", r.clip},
                      {"finite", r.finite},
                      {"skipped", r.skipped},
                      {"step_s", r.seconds},
                      {"compute_s", r.compute_seconds},
                      {"tokens_per_s", tokens_per_step / r.seconds}};
  if (!r.diverging_ranks.empty()) m["diverging_ranks"] = r.diverging_ranks;
  if (!r.versions.empty()) {  // SSP: the version each worker's gradient was computed on, and its staleness
    m["versions"] = r.versions;
    std::vector<int64_t> staleness;
    for (int64_t v : r.versions) staleness.push_back(r.step - v);
    m["staleness"] = staleness;
  }
  if (r.loss_scale > 0) m["loss_scale"] = r.loss_scale;  // fp16: the scale the step ran with
  return m;
}

Status save_at(Run& run, int64_t steps_done, CheckpointOptions options) {
  // A checkpoint records the evidence files' prefixes: never commit one over incomplete evidence.
  if (Status e = run.evidence_status(); !e.ok())
    options.precondition = Status(e.code(), "not saved (LATEST is unchanged): evidence incomplete: " + e.message(),
                                  "free space or fix the file system, then resume from the last checkpoint");
  SP_ASSIGN_OR_RETURN(
      const ckpt::SaveOutcome saved,
      save_checkpoint(*run.engine, *run.comms.world, run.trace, run.opt.out_dir, steps_done, run.contract, options));
  if (run.rank == 0)
    log_info("checkpoint step {}: {} ({:.1f} MB, {:.2f} s){}", steps_done, saved.dir, saved.bytes / 1e6, saved.seconds,
             saved.deleted.empty() ? "" : fmt::format("; removed step {}", fmt::join(saved.deleted, ", ")));
  return run.engine->faults().after_checkpoint(saved.dir);
}

// 5b. The anchored replay: for every anchor a, the reference's state at a − warmup, steps up to a, and
//     step a's records (metrics and anchors.json say which checkpoint each came from).
Status anchored_loop(Run& run, TrainSummary& summary) {
  const TrainOptions& opt = run.opt;
  const double tokens_per_step = static_cast<double>(run.config.train.global_batch * run.config.train.seq_len);
  nlohmann::json anchors = nlohmann::json::array();
  for (int64_t a : opt.anchors) {
    const int64_t start = a - opt.anchor_warmup;
    SP_ASSIGN_OR_RETURN(const ResumePlan from, plan_anchor(*run.comms.world, opt.anchor_from, start, run.contract));
    SP_RETURN_IF_ERROR(load_checkpoint(*run.engine, *run.comms.world, run.trace, from));
    for (int64_t s = start; s <= a; ++s) {
      const int64_t every = run.config.evidence.checksum_every;
      const bool take = s == a && every > 0 && s % every == 0;  // the reference's cadence
      StepResult r = run.engine->step(s, take);
      if (s < a) continue;  // warm-up: this topology's own step from the reference's state
      write_step_records(run, r, take);
      nlohmann::json m = step_metrics(r, tokens_per_step);
      m["anchor"] = start;
      run.write_metrics(m);
      summary.final_loss = r.loss;
      summary.steps = s + 1;
      if (run.rank == 0 && opt.progress)
        log_info("anchor {}: step {} from the reference's step {}: loss {:.6f}", a, s, start, r.loss);
    }
    anchors.push_back({{"step", a}, {"loaded", start}, {"manifest_digest", from.manifest.digest}});
  }
  for (int64_t s : opt.anchor_evals) {  // the reference's state at an evaluation point, evaluated on this topology
    SP_ASSIGN_OR_RETURN(const ResumePlan from, plan_anchor(*run.comms.world, opt.anchor_from, s + 1, run.contract));
    SP_RETURN_IF_ERROR(load_checkpoint(*run.engine, *run.comms.world, run.trace, from));
    const double ev = run.engine->evaluate(s);
    run.write_metrics({{"step", s}, {"eval_loss", ev}, {"anchor", s + 1}});
    summary.final_eval_loss = ev;
    if (run.rank == 0 && opt.progress)
      log_info("anchored eval after step {}: the reference's state {}: eval loss {:.6f}", s, s + 1, ev);
  }
  return run.on_rank0([&] {
    const nlohmann::json doc = {{"format_version", evidence::kAnchorsFormatVersion},
                                {"reference", opt.anchor_from},
                                {"warmup", opt.anchor_warmup},
                                {"anchors", anchors}};
    return write_file_atomic(run.paths.anchors(), doc.dump(2) + "\n");
  });
}

// 5. The training loop: a step, its evidence records, the evaluation when due, a checkpoint when due.
//    Stops with an error on diverged replicas or non-finite gradients (evidence.stop_on_divergence).
Status train_loop(Run& run, TrainSummary& summary) {
  const config::RunConfig& config = run.config;
  Engine& engine = *run.engine;
  CheckpointOptions ckpt_options;
  ckpt_options.keep_last = config.evidence.keep_last;
  ckpt_options.fault = run.opt.ckpt_fault;
  const int64_t first_step = run.resume.step;
  const int64_t steps = config.train.steps;
  const int64_t last_step = run.opt.stop_after > 0 ? std::min(run.opt.stop_after, steps) : steps;
  const double tokens_per_step = static_cast<double>(config.train.global_batch * config.train.seq_len);
  const auto checkpoint_due = [&](int64_t steps_done) {
    return (config.evidence.checkpoint_every > 0 && steps_done % config.evidence.checkpoint_every == 0) ||
           std::find(run.opt.checkpoint_at.begin(), run.opt.checkpoint_at.end(), steps_done) !=
               run.opt.checkpoint_at.end();
  };
  if (first_step == 0 &&
      std::find(run.opt.checkpoint_at.begin(), run.opt.checkpoint_at.end(), 0) != run.opt.checkpoint_at.end())
    SP_RETURN_IF_ERROR(save_at(run, 0, ckpt_options));  // the initial state (an anchored replay's step 0)
  const evidence::StepSchedule schedule = plan::step_schedule(config);  // the rule comm_predicted.json follows
  Stopwatch run_clock;
  double tokens_seen = 0;
  comm::StalenessHistogram staleness;  // SSP: applied gradients by staleness, so far
  for (int64_t s = first_step; s < last_step; ++s) {
    const bool take = schedule.checksums(s);
    StepResult r = engine.step(s, take);
    tokens_seen += tokens_per_step;
    Stopwatch record_clock;  // step_s includes writing this step's checksum records
    write_step_records(run, r, take);
    r.seconds += record_clock.seconds();
    nlohmann::json m = step_metrics(r, tokens_per_step);
    if (!r.versions.empty()) {
      comm::add_staleness(staleness, s, r.versions);
      m["staleness_histogram"] = comm::staleness_json(staleness);
    }
    if (schedule.eval_after(s)) {
      const double ev = engine.evaluate(s);
      m["eval_loss"] = ev;
      if (config.train.eval_batches > 0) summary.final_eval_loss = ev;
    }
    run.write_metrics(m);
    summary.final_loss = r.loss;
    summary.steps = s + 1;
    if (run.rank == 0 && run.opt.progress) {
      const double elapsed = run_clock.seconds();
      log_info("step {}/{} loss {:.4f} lr {:.2e} norm {:.3f} | {:.0f} tok/s | ETA {}", s + 1, steps, r.loss, r.lr,
               r.grad_norm, tokens_seen / elapsed,
               eta_string(elapsed / static_cast<double>(s + 1 - first_step) * static_cast<double>(steps - s - 1)));
    }
    if (!r.diverging_ranks.empty() && config.evidence.stop_on_divergence && config.parallel.staleness > 0)
      return failed_precondition(
          "step {}: worker(s) {} computed this step or hold parameters for the next beyond the staleness bound "
          "{} (versions computed on: {}), or differ from a worker holding the same version",
          s, fmt::join(r.diverging_ranks, ", "), config.parallel.staleness, fmt::join(r.versions, ", "));
    if (!r.diverging_ranks.empty() && config.evidence.stop_on_divergence)
      return failed_precondition(
          "step {}: dp replicas diverged: world rank(s) {} hold parameters that differ "
          "from their dp group's rank 0",
          s, fmt::join(r.diverging_ranks, ", "));
    SP_RETURN_IF_ERROR(r.status);  // fp16: an overflow at the minimum loss scale
    // fp16: an overflowing step is the loss scaler's to handle (skipped, scale lowered), not a divergence.
    if (!r.finite && r.loss_scale == 0 && config.evidence.stop_on_divergence)
      return failed_precondition("step {}: non-finite gradients (norm {}); no update was applied", s, r.grad_norm);
    if (checkpoint_due(s + 1)) SP_RETURN_IF_ERROR(save_at(run, s + 1, ckpt_options));
  }
  summary.tokens_per_second = tokens_seen / run_clock.seconds();
  return Status();
}

// 6. Finish: the memory ledger (measured on every rank while everything is live, against the
//    prediction), then every evidence file closed and checked: a run whose evidence is incomplete
//    fails, naming the file. Every failure is reported, the training loop's first, then the evidence
//    files' (the first that failed on the lowest rank), then the ledger's.
Status finish(Run& run, const Status& loop) {
  Status ledger;
  if (run.opt.anchor_from.empty()) {  // an anchored replay neither evaluates nor runs the planned steps
    nlohmann::json mine = plan::compare_ledger(run.ledger, run.engine->predicted_ledger());
    mine["rank"] = run.rank;
    mine["coords"] = run.engine->label(run.rank);
    ledger =
        evidence::write_ledger_report(*run.comms.world, mine, run.config.evidence.memory_budget_mb, run.opt.out_dir);
  }
  run.engine.reset();
  for (Status s :
       {run.timeline->close(), run.checksums ? run.checksums->close() : Status(),
        run.metrics ? run.metrics->close() : Status(), run.activations ? run.activations->close() : Status()})
    (void)s;  // each writer keeps its first error (a failed close included): evidence_status() has them all
  Status files = run.evidence_status();
  files = run.agree(files.ok() ? files
                               : Status(files.code(), "evidence incomplete: " + files.message(),
                                        "free space or fix the file system and train again (a run with a "
                                        "checkpoint resumes from it)"));
  std::vector<Status> failed;
  for (const Status* s : std::initializer_list<const Status*>{&loop, &files, &ledger}) {
    bool said = false;  // the loop's error may already carry the evidence files' (a refused checkpoint)
    const std::string_view what = std::string_view(s->message()).substr(s->message().find(':') + 1);
    for (const Status& f : failed) said = said || f.message().find(what) != std::string::npos;
    if (!s->ok() && !said) failed.push_back(*s);
  }
  if (failed.empty()) return Status();
  std::string message = failed.front().message();
  for (size_t i = 1; i < failed.size(); ++i) message += "\n  also: " + failed[i].message();
  return Status(failed.front().code(), message, failed.front().hint());
}

}  // namespace

Result<TrainSummary> run_training(const config::RunConfig& config, const TrainOptions& opt, comm::MpiScope& mpi) {
  SP_ASSIGN_OR_RETURN(Setup setup, validate_and_plan(config, opt, mpi));
  Run run(config, opt, std::move(setup), mpi.world_rank());
  SP_RETURN_IF_ERROR(prepare_data(run, mpi));
  if (opt.contract_only) return TrainSummary{};
  SP_RETURN_IF_ERROR(check_memory_fit(run.plan, run.grid, *run.comms.world));
  SP_RETURN_IF_ERROR(open_evidence(run));
  TrainSummary summary;
  SP_RETURN_IF_ERROR(initialize_or_resume(run, summary));
  const Status loop = opt.anchor_from.empty() ? train_loop(run, summary) : anchored_loop(run, summary);
  SP_RETURN_IF_ERROR(finish(run, loop));
  return summary;
}

}  // namespace sp::parallel
