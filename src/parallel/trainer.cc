// run_training (trainer.h): the phases around the training loop, each a function here: 1 validate and
// plan, 2 prepare the data and freeze the contract, 3 open the evidence, 4 initialize or resume, 6 finish;
// phase 5, the loop itself, is train_loop.cc. Run (train_run.h) carries one rank's state between them.
#include "parallel/trainer.h"

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <memory>

#include "comm/topology.h"
#include "comm/traced_communicator.h"
#include "core/file_io.h"
#include "core/log.h"
#include "data/bpe_train.h"
#include "data/prepare.h"
#include "evidence/contract.h"
#include "evidence/ledger_report.h"
#include "evidence/run_dir.h"
#include "kernels/gemm32_auto.h"
#include "kernels/matmul.h"
#include "parallel/memory_fit.h"
#include "parallel/parameter_server.h"
#include "parallel/train_run.h"
#include "plan/ledger_model.h"
#include "plan/run_plan.h"
#include "plan/traffic_model.h"

namespace sp::parallel {

Result<plan::RunPlan> plan_run(const config::RunConfig& config, int world) {
  SP_ASSIGN_OR_RETURN(plan::RunPlan plan, plan::RunPlan::make(config, world));
  // The vocabulary is the tokenizer `data prepare` trains (a given tokenizer's is checked against its file):
  // refused here, before --out is claimed.
  if (Status v = config.data.tokenizer.empty() ? data::validate_vocab_size(config.data.vocab_size) : Status(); !v.ok())
    return Status(v.code(),
                  config.model_config.is_object() && config.model_config.contains("file")
                      ? fmt::format("\"vocab_size\" in '{}' (model.vocab_size and data.vocab_size): {}",
                                    config.model_config["file"].get<std::string>(), v.message())
                      : fmt::format("data.vocab_size: {}", v.message()),
                  v.hint());
  return plan;
}

namespace train_detail {
namespace {

std::string resolve(const std::string& root, const std::string& path) {
  return std::filesystem::path(path).is_absolute() ? path : (std::filesystem::path(root) / path).string();
}

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

// train.gemm32 = "auto": rank 0's pick for its host (kernels/gemm32_auto.h: cached per host, measured once), run by
// every rank, so that ranks on hosts with different picks still sum in one order; written into the plan's config,
// which the contract and the engine read.
Status resolve_auto_gemm32(Run& run) {
  kernels::Gemm32Kind& kind = run.plan.config.train.gemm32;
  if (kind != kernels::Gemm32Kind::kAuto) return Status();
  std::string name;
  SP_RETURN_IF_ERROR(run.on_rank0([&]() -> Status {
    SP_ASSIGN_OR_RETURN(const kernels::Gemm32Auto a, kernels::gemm32_auto(run.plan.config.parallel.blas_threads));
    name = kernels::gemm32_kind_name(a.kind);
    log_debug("train.gemm32 = \"auto\" → \"{}\" ({}; OpenBLAS {:.1f} ms, oneDNN {:.1f} ms per probe round)", name,
              a.origin, a.probe.openblas_s * 1e3, a.probe.onednn_s * 1e3);
    return Status();
  }));
  name = comm::broadcast_string(*run.comms.world, name);
  SP_ASSIGN_OR_RETURN(kind, kernels::gemm32_kind_from_name(name));
  return Status();
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
    // With a user's tokenizer the checkpoint's vocabulary must be the tokenizer's (docs/data.md).
    const std::string tokenizer = config.data.tokenizer.empty() ? "" : resolve(run.opt.root_dir, config.data.tokenizer);
    if (!tokenizer.empty())
      SP_RETURN_IF_ERROR(run.agree(data::check_tokenizer_vocab(tokenizer, config.data.vocab_size)));
    auto weights = ckpt::read_hf_weights(run.opt.init_from, config.model);
    if (!weights.ok() && !tokenizer.empty())
      weights = weights.status().with_context(fmt::format("--init-from '{}' against the tokenizer '{}' ({} tokens)",
                                                          run.opt.init_from, tokenizer, config.data.vocab_size));
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
  if (!config.data.tokenizer.empty()) popt.tokenizer_file = resolve(run.opt.root_dir, config.data.tokenizer);
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

  SP_RETURN_IF_ERROR(resolve_auto_gemm32(run));
  const config::RunConfig& resolved = run.plan.config;  // `config` with train.gemm32 resolved
  run.contract = evidence::make_contract(
      {resolved.to_json(), nlohmann::json(data::identity_to_json(run.train->identity())), mpi.library_version(),
       mpi.world_size(), gemm16_backend_name(run.plan), kernels::gemm32_backend_name(resolved.train.gemm32)});
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
}  // namespace train_detail

Result<TrainSummary> run_training(const config::RunConfig& config, const TrainOptions& opt, comm::MpiScope& mpi) {
  namespace d = train_detail;
  SP_ASSIGN_OR_RETURN(d::Setup setup, d::validate_and_plan(config, opt, mpi));
  d::Run run(config, opt, std::move(setup), mpi.world_rank());
  SP_RETURN_IF_ERROR(d::prepare_data(run, mpi));
  if (opt.contract_only) return TrainSummary{};
  SP_RETURN_IF_ERROR(check_memory_fit(run.plan, run.grid, *run.comms.world));
  SP_RETURN_IF_ERROR(d::open_evidence(run));
  TrainSummary summary;
  SP_RETURN_IF_ERROR(d::initialize_or_resume(run, summary));
  const Status loop = opt.anchor_from.empty() ? d::train_loop(run, summary) : d::anchored_loop(run, summary);
  SP_RETURN_IF_ERROR(d::finish(run, loop));
  return summary;
}

}  // namespace sp::parallel
