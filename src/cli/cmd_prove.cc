// `shardproof prove`: the driver of the four-stage protocol (cli/prove.h, docs/prove.md). It runs each
// stage as its own mpirun launch of this binary, records how each ended in prove.json, seals the
// bundle and derives the gate from the files (proof/gate.h) exactly as `verify DIR` does.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>

#include "ckpt/load.h"
#include "ckpt/manifest.h"
#include "ckpt/names.h"
#include "cli/command.h"
#include "cli/prove.h"
#include "cli/run_setup.h"
#include "core/dir_lock.h"
#include "core/file_io.h"
#include "evidence/bundle_paths.h"
#include "evidence/faults.h"
#include "evidence/run_dir.h"
#include "plan/protocol.h"
#include "plan/run_plan.h"
#include "plan/strategy.h"
#include "proof/gate.h"
#include "proof/seal.h"
#include "report/render.h"

namespace sp::cli {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The first "shardproof: error: ..." line of a stage's log, and the rank mpirun saw die.
void read_stage_log(const std::string& log, json& record) {
  std::ifstream in(log);
  std::string line;
  static const std::regex kDied(R"(process rank (\d+) with PID .* exited on signal (\d+))");
  while (std::getline(in, line)) {
    if (!record.contains("error") && line.find("error:") != std::string::npos) record["error"] = line;
    std::smatch m;
    if (std::regex_search(line, m, kDied)) {
      record["crashed_rank"] = std::stoi(m[1].str());
      record["error"] = fmt::format("world rank {} died on signal {}", m[1].str(), m[2].str());
    }
  }
}

class Protocol {
 public:
  Protocol(const ProveOptions& o, std::string root, config::RunConfig config, plan::ProtocolPlan plan,
           DirectoryLock& lock)
      : o_(o),
        paths_(o.out),
        root_(std::move(root)),
        config_(std::move(config)),
        plan_(std::move(plan)),
        fault_(plan_.fault),
        k_(plan_.checkpoint_step),
        lock_(lock) {
    prove_ = {{"format_version", evidence::kProveFormatVersion},
              {"fault", fault_.to_string()},
              {"checkpoint_step", k_},
              {"world_size", config_.parallel.world()},
              {"anchors", plan_.anchors},
              {"fault_anchors", plan_.fault_anchors},
              {"fault_warmup", plan_.fault_warmup},
              {"anchored_evals", plan_.anchored_evals},
              {"title", o_.title.empty() ? std::string("shardproof prove") : o_.title},
              {"stages", json::array()}};
    if (!o_.lab.is_null()) prove_["lab"] = o_.lab;
  }

  static std::string steps_list(const std::vector<int64_t>& steps) { return fmt::format("{}", fmt::join(steps, ",")); }

  // An anchored replay (docs/equivalence.md §anchored): the parallel topology from the reference's
  // state at every anchor.
  int anchored_stage(const std::string& name, const evidence::RunPaths& out, const std::vector<int64_t>& anchors,
                     int64_t warmup, bool with_fault) {
    auto args = evidence_sets(0, with_fault ? 20 : 120);
    args.insert(args.end(), {"--out", out.root(), "--anchor-from", paths_.reference().root(), "--anchors",
                             steps_list(anchors), "--anchor-warmup", std::to_string(warmup)});
    if (with_fault) args.insert(args.end(), {"--fault", fault_.to_string()});
    if (!with_fault && !plan_.anchored_evals.empty())                        // the held-out eval, anchored
      args.push_back("--anchor-evals=" + steps_list(plan_.anchored_evals));  // "=": the list starts with -1
    return stage(name, config_.parallel.world(), args);
  }

  // One stage: `mpirun -np N shardproof train <common> <extra>`, logged to logs/<name>.log.
  int stage(const std::string& name, int np, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"train", "--root", root_};
    if (!o_.cache.empty()) args.insert(args.end(), {"--cache", o_.cache});
    // Every stage maps the ds_config with the parallel run's dp, so the reference's one rank trains the same
    // batch (DeepSpeed's rule holds for the parallel run; the reference accumulates dp times more).
    const std::vector<std::string> source = o_.source.train_args(config_.parallel.dp);
    args.insert(args.end(), source.begin(), source.end());
    args.insert(args.end(), extra.begin(), extra.end());
    if (o_.quiet) args.push_back("--quiet");
    const std::string log = paths_.log(name);
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run_with_mpirun(np, args, log);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    json record = {{"name", name},
                   {"ranks", np},
                   {"exit_code", rc},
                   {"seconds", seconds},
                   {"log", evidence::ProofPaths::log_file(name)},
                   {"command", fmt::format("{}", fmt::join(args, " "))}};
    read_stage_log(log, record);
    prove_["stages"].push_back(record);
    (void)write_file_atomic(paths_.prove(), prove_.dump(2) + "\n");
    std::printf("  %-10s %d rank%s  exit %d  (%.1f s)%s\n", name.c_str(), np, np == 1 ? " " : "s", rc, seconds,
                rc == 0 ? "" : fmt::format("  {}", record.value("error", std::string())).c_str());
    std::fflush(stdout);
    return rc;
  }

  std::vector<std::string> evidence_sets(int64_t checkpoint_every, double watchdog) const {
    return {"--set",
            "evidence.activation_digests=true",
            "--set",
            fmt::format("evidence.checkpoint_every={}", checkpoint_every),
            "--set",
            fmt::format("evidence.keep_last={}", config_.train.steps + 1),
            "--set",
            fmt::format("evidence.watchdog_seconds={}", watchdog),
            "--expect-contract",
            paths_.contract()};
  }

  // Stage 4's starting point: the parallel run's step-k checkpoint and its evidence prefix.
  Status prepare_recovery() const {
    const evidence::RunPaths from = paths_.parallel(), to = paths_.recovery();
    const ckpt::CheckpointPaths src = from.checkpoints(), dst = to.checkpoints();
    SP_ASSIGN_OR_RETURN(const ckpt::Manifest m, ckpt::read_manifest(src, k_));
    std::error_code ec;
    fs::create_directories(dst.root(), ec);
    fs::copy(src.step_dir(k_), dst.step_dir(k_), fs::copy_options::recursive, ec);
    if (ec) return io_error("cannot copy '{}' to '{}': {}", src.step_dir(k_), dst.step_dir(k_), ec.message());
    SP_RETURN_IF_ERROR(write_file_atomic(dst.latest(), ckpt::Latest{k_, m.digest}.to_text()));
    for (const auto& [src_file, dst_file] :
         {std::pair{from.checksums(), to.checksums()}, {from.metrics(), to.metrics()}}) {
      fs::copy_file(src_file, dst_file, ec);
      if (ec) return io_error("cannot copy '{}': {}", src_file, ec.message());
    }
    return Status();
  }

  int run() {
    const config::ParallelConfig& pc = config_.parallel;
    const int n = pc.world();
    const bool ckpt_fault = evidence::is_checkpoint_fault(fault_.kind);
    std::printf("shardproof prove: %s, dp %d × tp %d × pp %d, zero %d, %lld steps; fault %s; checkpoint at step %lld\n",
                config_.name.c_str(), pc.dp, pc.tp, pc.pp, pc.zero, static_cast<long long>(config_.train.steps),
                fault_.to_string().c_str(), static_cast<long long>(k_));
    std::printf("[1/4] contract: freeze config, data, build and versions\n");
    // The contract stage writes into the bundle's root, which this driver holds locked otherwise:
    // the stage takes the lock for its own lifetime, and the driver takes it back after.
    const std::string lock_path = lock_.path();
    lock_.release();
    const int contract_rc = stage("contract", n, {"--out", paths_.root(), "--contract-only"});
    auto relocked = DirectoryLock::acquire(lock_path, paths_.root());
    if (!relocked.ok()) return report_status(relocked.status());
    lock_ = std::move(relocked).value();
    if (contract_rc != 0) return finish();
    std::printf("[2/4] reference: one device, then the parallel configuration (checkpoint at step %lld)\n",
                static_cast<long long>(k_));
    auto ref = evidence_sets(0, 120);
    ref.insert(ref.end(), {"--out", paths_.reference().root()});
    const plan::Strategy parallel = plan::strategy_of(config_);
    for (const std::string& s : plan::strategy_sets(plan::single_device(parallel), parallel))
      ref.insert(ref.end(), {"--set", s});
    if (!plan_.reference_checkpoints.empty())  // the states the anchored replays start from
      ref.insert(ref.end(), {"--checkpoint-at", steps_list(plan_.reference_checkpoints)});
    if (stage("reference", 1, ref) != 0) return finish();
    auto par = evidence_sets(k_, 120);
    par.insert(par.end(), {"--out", paths_.parallel().root()});
    if (stage("parallel", n, par) != 0) return finish();
    if (!plan_.anchors.empty()) {
      std::printf("      not a bitwise class: replaying %zu anchored steps from the reference's state\n",
                  plan_.anchors.size());
      if (anchored_stage(std::string(evidence::kAnchoredStage), paths_.anchored(), plan_.anchors, 0, false) != 0)
        return finish();
    }
    std::printf("[3/4] fault: the same contract with %s\n", fault_.to_string().c_str());
    auto flt = evidence_sets(ckpt_fault ? k_ : 0, 20);
    flt.insert(flt.end(), {"--out", paths_.fault().root(), "--fault", fault_.to_string()});
    stage("fault", n, flt);            // expected to fail for some faults: its ending is evidence
    if (!plan_.fault_anchors.empty())  // may fail too (a crash, a non-finite gradient)
      anchored_stage(std::string(evidence::kFaultAnchoredStage), paths_.fault_anchored(), plan_.fault_anchors,
                     plan_.fault_warmup, true);
    if (o_.no_recovery) {
      std::printf("[4/4] recovery: skipped (--no-recovery): the gate cannot pass\n");
      return finish();
    }
    std::printf("[4/4] recovery: no fault, resume from the step-%lld checkpoint\n", static_cast<long long>(k_));
    if (Status s = prepare_recovery(); !s.ok()) {
      prove_["stages"].push_back({{"name", "recovery"}, {"exit_code", 1}, {"error", s.message()}});
      (void)write_file_atomic(paths_.prove(), prove_.dump(2) + "\n");
      return finish();
    }
    auto rec = evidence_sets(0, 120);
    rec.insert(rec.end(), {"--out", paths_.recovery().root(), "--resume", "required"});
    stage("recovery", n, rec);
    return finish();
  }

  // Seal, derive the gate from the files, write gate.json and summary.md, print the verdict.
  int finish() {
    (void)write_file_atomic(paths_.prove(), prove_.dump(2) + "\n");
    if (Status s = proof::seal_bundle(o_.out); !s.ok()) return report_status(s);
    if (!o_.sign.empty())
      if (Status s = proof::sign_seal(o_.out, o_.sign); !s.ok()) return report_status(s);
    auto verdict = proof::derive_gate(o_.out);
    if (!verdict.ok()) {
      std::printf("verdict: FAIL (%s)\nbundle: %s\n", verdict.status().message().c_str(), o_.out.c_str());
      return 1;
    }
    for (const auto& [file, text] : proof::derived_files(*verdict))
      if (Status s = write_file_atomic(paths_.file(file), text); !s.ok()) return report_status(s);
    print_verdict(*verdict, o_.out);
    // The HTML report, derived from the sealed files like summary.md (docs/report.md).
    if (auto r = report::write_report(o_.out); r.ok())
      std::printf("report: %s\n", paths_.file(evidence::kReportFile).c_str());
    else
      std::printf("report: not written: %s\n", r.status().message().c_str());
    return verdict->gate.passed() ? 0 : 1;
  }

 private:
  const ProveOptions& o_;
  const evidence::ProofPaths paths_;
  std::string root_;
  config::RunConfig config_;
  plan::ProtocolPlan plan_;
  evidence::FaultSpec fault_;
  int64_t k_;
  DirectoryLock& lock_;  // the bundle's root, held for the whole protocol but its contract stage
  json prove_;
};

}  // namespace

void print_verdict(const proof::ProofVerdict& v, const std::string& bundle) {
  for (const proof::Criterion& c : v.gate.criteria)
    std::printf("  %s %-48s %s%s\n", !c.required ? "(i) " : (c.passed ? "ok  " : "FAIL"), c.name.c_str(),
                c.measured.c_str(), c.detail.empty() || c.passed ? "" : fmt::format("\n       {}", c.detail).c_str());
  std::printf("%s\nverdict: %s\nbundle: %s (read summary.md first)\n", v.divergence.line().c_str(),
              v.gate.passed() ? "PASS" : "FAIL", bundle.c_str());
  std::fflush(stdout);
}

int run_prove(const ProveOptions& options) {
  if (launched_by_mpi())
    return report_status(invalid_argument("shardproof prove is the driver; do not start it under mpirun")
                             .with_hint("run `shardproof prove ...` directly: it launches mpirun for each stage"));
  const std::string root = options.source.root_or_default();
  ProveOptions o = options;
  RunSource& source = o.source;
  if (!source.deepspeed.empty())
    if (Status s = check_input_file("--deepspeed", source.deepspeed); !s.ok()) return report_status(s);
  auto config = source.load(config::DeepSpeedInput{.file = source.deepspeed, .world = source.np});
  if (!config.ok()) return report_status(config.status());
  if (source.np > 0) {  // the parallel run's world: dp from it (as DeepSpeed's launcher), passed to every stage
    if (config->parallel.world() != source.np)  // a --set parallel.dp that disagrees
      return report_status(invalid_argument("--np {} but the configuration's world is dp × tp × pp = {} × {} × {} = {}",
                                            source.np, config->parallel.dp, config->parallel.tp, config->parallel.pp,
                                            config->parallel.world())
                               .with_hint("drop --set parallel.dp (dp is then --np / (tp × pp)), or fix --np"));
    source.sets.push_back(fmt::format("parallel.dp={}", config->parallel.dp));
  }
  if (auto plan = plan::RunPlan::make(*config, config->parallel.world()); !plan.ok())
    return report_status(plan.status());
  auto protocol = plan::plan_protocol(*config, o.fault);
  if (!protocol.ok()) return report_status(protocol.status());
  if (!o.sign.empty())
    if (Status s = proof::check_signing_key(o.sign); !s.ok()) return report_status(s.with_context("--sign"));
  if (o.out.empty()) return report_status(invalid_argument("--out is required"));
  // A new bundle: --out is absent or empty (a lock file alone is a run that never wrote anything);
  // checked again once this driver holds its lock, so two drivers cannot both start into it.
  auto holds_anything = [&] {
    auto c = evidence::inspect_run_dir(o.out);
    return !c.ok() || !c->run_entries.empty() || !c->foreign.empty() || c->seal.has_value();
  };
  const std::string never = "a proof bundle is never overwritten: choose a new directory";
  if (holds_anything())
    return report_status(invalid_argument("--out '{}' already exists and is not empty", o.out).with_hint(never));
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) return report_status(io_error("cannot create '{}': {}", o.out, ec.message()));
  auto lock = DirectoryLock::acquire((fs::path(o.out) / evidence::kLockFile).string(), o.out);
  if (!lock.ok()) return report_status(lock.status());
  if (holds_anything())
    return report_status(invalid_argument("--out '{}' was filled by another process", o.out).with_hint(never));
  fs::create_directories(o.out + "/logs", ec);
  if (ec) return report_status(io_error("cannot create '{}': {}", o.out, ec.message()));
  return Protocol(o, root, *config, std::move(protocol).value(), *lock).run();
}

void register_prove(CLI::App& app, CommandResult& result) {
  auto o = std::make_shared<ProveOptions>();
  CLI::App* cmd = app.add_subcommand("prove", "Run the four-stage proof protocol and its gate (docs/prove.md)");
  add_run_source_options(
      cmd, o->source,
      {.np = NpOption::kWorld,
       .model_config_help = "The [model] from a Hugging Face LLaMA config.json, before --set (docs/huggingface.md)",
       .set_help = "Override a key: --set parallel.dp=2 (repeatable)",
       .deepspeed_help = "DeepSpeed ds_config.json for every stage (docs/deepspeed.md)",
       .np_help = "World size of the parallel run: dp = NP / (tp × pp) unless --set gives dp"});
  cmd->add_option("--fault", o->fault, "Stage-3 fault NAME[@STEP][:RANK] (docs/faults.md); default: [prove].fault");
  cmd->add_option("--out", o->out, "Bundle directory (new)")->required();
  cmd->add_option("--cache", o->cache, "Prepared-data cache directory");
  cmd->add_flag("--quiet", o->quiet, "No per-step progress in the stage logs");
  cmd->add_flag("--no-recovery", o->no_recovery, "Skip stage 4 (the gate then fails: recovery is required)");
  cmd->add_option("--sign", o->sign,
                  "Ed25519 private key (PEM) to sign the seal with (bundle.sig); `verify --key PUB` checks it");
  cmd->callback([o, &result] { result.exit_code = run_prove(*o); });
}

}  // namespace sp::cli
