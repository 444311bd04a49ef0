// `shardproof train`: one training run with its evidence bundle (docs/cli.md).
#include <fmt/format.h>

#include <memory>

#include "cli/command.h"
#include "cli/run_setup.h"
#include "cli/run_source.h"
#include "comm/mpi_scope.h"
#include "core/log.h"
#include "evidence/faults.h"
#include "parallel/checkpointing.h"
#include "parallel/trainer.h"

namespace sp::cli {

namespace {

// "done: 30 steps (resumed at step 20), loss 6.1, eval loss 6.2 (at init 7.6), 5000 tokens/s; evidence in DIR":
// an evaluation that did not run is said, never printed as a number.
std::string summary_line(const parallel::TrainSummary& s, const std::string& out) {
  std::string line = fmt::format("done: {} steps", s.steps);
  if (s.first_step > 0) line += fmt::format(" (resumed at step {})", s.first_step);
  if (s.steps > s.first_step) line += fmt::format(", loss {:.4f}", s.final_loss);
  if (s.final_eval_loss)
    line += fmt::format(", eval loss {:.4f}", *s.final_eval_loss);
  else
    line += ", no evaluation ran";
  if (s.initial_eval_loss) line += fmt::format(" (at init {:.4f})", *s.initial_eval_loss);
  if (s.steps > s.first_step) line += fmt::format(", {:.0f} tokens/s", s.tokens_per_second);
  return line + "; evidence in " + out;
}

// Every option of `train`; the run's sources are the shared group (cli/run_source.h).
struct TrainOpts {
  RunSource source;
  std::string out, cache;
  int deepspeed_dp = 0;
  bool quiet = false;
  // Checkpoints (docs/checkpoints.md).
  std::string resume = "auto", init_from;
  bool overwrite = false;
  std::vector<std::string> faults;
  bool fallback_previous = false;
  bool convert_precision = false;
  int64_t stop_after = 0;
  // The proof protocol (docs/prove.md).
  std::string expect_contract;
  bool contract_only = false;
  std::vector<int64_t> checkpoint_at, anchors;
  std::string anchor_from;
  int64_t anchor_warmup = 0;
  std::vector<int64_t> anchor_evals;
};

// Resuming, overwriting, stopping, initializing and injecting a fault (docs/checkpoints.md, docs/faults.md).
void add_checkpoint_options(CLI::App* cmd, TrainOpts& o) {
  cmd->add_option("--resume", o.resume,
                  "auto: resume from the run directory's newest checkpoint if there is one; required: refuse to "
                  "start without one; never: refuse to start if the directory holds checkpoints")
      ->check(CLI::IsMember({"auto", "required", "never"}));
  cmd->add_flag("--overwrite", o.overwrite,
                "Clear --out first if it holds another run (never a sealed proof bundle; docs/checkpoints.md)");
  cmd->add_flag("--fallback-previous", o.fallback_previous,
                "If the newest checkpoint is damaged, resume from the previous good one (saying so)");
  cmd->add_flag("--convert-precision", o.convert_precision,
                "Resume a checkpoint saved in another train.precision/grad_dtype from its fp32 master weights");
  cmd->add_option("--stop-after", o.stop_after, "Stop after this many steps, as an interrupted run would")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--init-from", o.init_from,
                  "Start a fresh run from Hugging Face weights: one safetensors file, a model.safetensors.index.json "
                  "or a directory holding either (F32, BF16 or F16; docs/huggingface.md)");
  cmd->add_option("--fault", o.faults,
                  "Inject one fault: a catalogue fault NAME[@STEP][:RANK] (docs/faults.md), or a checkpoint-save "
                  "fault ckpt-kill-PHASE[@STEP][:RANK], ckpt-enospc[@STEP][:RANK] (docs/checkpoints.md)");
}

// What the proof protocol's stages pass (docs/prove.md): the frozen contract, the anchored replay.
void add_protocol_options(CLI::App* cmd, TrainOpts& o) {
  cmd->add_option("--expect-contract", o.expect_contract,
                  "Refuse to run unless this run's contract equals the frozen one in FILE (up to topology and "
                  "evidence settings; docs/prove.md)");
  cmd->add_flag("--contract-only", o.contract_only, "Prepare the data, write contract.json to --out and stop");
  cmd->add_option("--checkpoint-at", o.checkpoint_at,
                  "Also save the state after these steps (0: the initial state), e.g. an anchored replay's anchors")
      ->delimiter(',');
  cmd->add_option("--anchor-from", o.anchor_from,
                  "Anchored replay (docs/equivalence.md): run each --anchors step from this reference run's checkpoint "
                  "of that step, on this run's topology");
  cmd->add_option("--anchors", o.anchors, "Anchored replay: the steps to replay, increasing (comma-separated)")
      ->delimiter(',');
  cmd->add_option("--anchor-warmup", o.anchor_warmup,
                  "Anchored replay: start this many steps before each anchor (faults that need the previous step)")
      ->check(CLI::Range(0, 1));
  cmd->add_option("--anchor-evals", o.anchor_evals,
                  "Anchored replay: also evaluate the held-out split from the reference's state at these evaluation "
                  "points (S: the eval after step S, from its checkpoint S + 1; -1: the initial state)")
      ->delimiter(',');
}

// The engine's options from the command line; a --fault is either a checkpoint-save fault or a catalogue one.
Result<parallel::TrainOptions> train_options(const TrainOpts& o, const std::string& root) {
  parallel::TrainOptions topt;
  topt.out_dir = o.out;
  topt.overwrite = o.overwrite;
  topt.root_dir = root;
  topt.cache_dir = o.cache.empty() ? default_cache_dir(root) : o.cache;  // an installed root is read-only
  topt.progress = !o.quiet;
  topt.resume.mode = parallel::parse_resume_mode(o.resume).value();  // CLI::IsMember checked it
  topt.resume.fallback_previous = o.fallback_previous;
  topt.resume.convert_precision = o.convert_precision;
  topt.stop_after = o.stop_after;
  topt.init_from = o.init_from;
  topt.expect_contract = o.expect_contract;
  topt.contract_only = o.contract_only;
  topt.checkpoint_at = o.checkpoint_at;
  topt.anchor_from = o.anchor_from;
  topt.anchors = o.anchors;
  topt.anchor_warmup = o.anchor_warmup;
  topt.anchor_evals = o.anchor_evals;
  if (o.faults.size() > 1)
    return invalid_argument("--fault given {} times; a run injects at most one fault", o.faults.size());
  for (const std::string& spec : o.faults) {
    SP_ASSIGN_OR_RETURN(const std::optional<ckpt::SaveFault> save_fault, ckpt::parse_save_fault(spec));
    if (save_fault.has_value()) {
      topt.ckpt_fault = *save_fault;
      continue;
    }
    auto fault = evidence::parse_fault(spec);
    if (!fault.ok())
      return fault.status().with_hint(
          "or a checkpoint-save fault: ckpt-kill-PHASE[@STEP][:RANK], ckpt-enospc[@STEP][:RANK]");
    topt.fault = *fault;
  }
  return topt;
}

// The callback: relaunch under mpirun for --np, else one rank of the run.
int run_train(const TrainOpts& o, const CLI::App& cmd) {
  if (o.overwrite && o.resume == "required")
    return report_status(
        invalid_argument("--overwrite clears --out, --resume required continues it").with_hint("pass one of them"));
  if (o.source.np > 0 && !launched_by_mpi()) return relaunch_with_mpirun(o.source.np, relaunch_args(cmd, {"train"}));
  const std::string root = o.source.root_or_default();
  const config::DeepSpeedInput deepspeed{.file = o.source.deepspeed,
                                         .rule_dp = o.deepspeed_dp,
                                         .world = o.source.deepspeed.empty() ? 0 : launched_world_size()};
  auto config = o.source.load(deepspeed);
  if (!config.ok()) return report_status(config.status());
  comm::MpiScope mpi(nullptr, nullptr);
  auto topt = train_options(o, root);
  if (!topt.ok()) return report_status(topt.status());
  auto summary = parallel::run_training(*config, *topt, mpi);
  if (!summary.ok()) return report_status(summary.status());
  if (mpi.world_rank() == 0 && o.contract_only)
    log_info("contract written: {}/contract.json", o.out);
  else if (mpi.world_rank() == 0)
    log_info("{}", summary_line(*summary, o.out));
  return 0;
}

}  // namespace

void register_train(CLI::App& app, CommandResult& result) {
  auto o = std::make_shared<TrainOpts>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model and write its evidence bundle");
  add_run_source_options(cmd, o->source,
                         {.np = NpOption::kLaunch,
                          .deepspeed_help = "DeepSpeed ds_config.json, mapped after the preset/--config and before "
                                            "every --set (docs/deepspeed.md); dp is the launcher's world size over "
                                            "tp × pp unless --set gives it"});
  cmd->add_option("--deepspeed-dp", o->deepspeed_dp,
                  "The dp of the ds_config's batch rule (default: the run's); prove's reference stage passes the "
                  "parallel run's")
      ->check(CLI::PositiveNumber)
      ->group("");
  cmd->add_option("--out", o->out, "Evidence bundle directory")->required();
  cmd->add_option("--cache", o->cache, "Prepared-data cache directory (default: <root>/.shardproof-cache)");
  cmd->add_flag("--quiet", o->quiet, "No progress line");
  add_checkpoint_options(cmd, *o);
  add_protocol_options(cmd, *o);
  cmd->callback([o, &result, cmd] { result.exit_code = run_train(*o, *cmd); });
}

}  // namespace sp::cli
