// `shardproof prove`: the driver of the four-stage protocol (cli/prove.h, docs/prove.md). It runs each
// stage as its own mpirun launch of this binary, records how each ended in prove.json, seals the
// bundle and derives the gate from the files (parallel/proof.h) exactly as `verify DIR` does.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>

#include <fmt/format.h>

#include "ckpt/load.h"
#include "ckpt/manifest.h"
#include "ckpt/names.h"
#include "cli/command.h"
#include "cli/prove.h"
#include "cli/run_setup.h"
#include "core/file_io.h"
#include "evidence/faults.h"
#include "parallel/plan.h"
#include "parallel/proof.h"
#include "parallel/trainer.h"
#include "report/render.h"
#include "report/report_data.h"

namespace sp::cli {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// The fault stage 3 injects when neither --fault nor [prove].fault names one: the first the topology
// can express, in the order the mission statement lists the classic silent errors.
std::string default_fault(const parallel::ParallelConfig& pc) {
  if (pc.dp > 1) return "skip-grad-allreduce";
  if (pc.tp > 1) return "drop-tp-allreduce";
  if (pc.pp > 1) return "pp-microbatch-swap";
  return "stale-grad";
}

bool is_ckpt_fault(evidence::FaultKind k) {
  return k == evidence::FaultKind::kCkptBitflip || k == evidence::FaultKind::kCkptTruncate ||
         k == evidence::FaultKind::kCkptMissingShard;
}

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
  Protocol(const ProveOptions& o, std::string root, parallel::RunConfig config, evidence::FaultSpec fault, int64_t k)
      : o_(o), root_(std::move(root)), config_(std::move(config)), fault_(fault), k_(k) {
    prove_ = {{"format_version", 1},
              {"fault", fault_.to_string()},
              {"checkpoint_step", k_},
              {"world_size", config_.parallel.world()},
              {"stages", json::array()}};
  }

  // One stage: `mpirun -np N shardproof train <common> <extra>`, logged to logs/<name>.log.
  int stage(const std::string& name, int np, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"train", "--root", root_};
    if (!o_.cache.empty()) args.insert(args.end(), {"--cache", o_.cache});
    if (!o_.config.empty()) args.insert(args.end(), {"--config", o_.config});
    if (!o_.preset.empty()) args.insert(args.end(), {"--preset", o_.preset});
    for (const std::string& s : o_.sets) args.insert(args.end(), {"--set", s});
    args.insert(args.end(), extra.begin(), extra.end());
    if (o_.quiet) args.push_back("--quiet");
    const std::string log = fmt::format("{}/logs/{}.log", o_.out, name);
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run_with_mpirun(np, args, log);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    json record = {{"name", name}, {"ranks", np}, {"exit_code", rc}, {"seconds", seconds},
                   {"log", fmt::format("logs/{}.log", name)}, {"command", fmt::format("{}", fmt::join(args, " "))}};
    read_stage_log(log, record);
    prove_["stages"].push_back(record);
    (void)write_file_atomic(o_.out + "/prove.json", prove_.dump(2) + "\n");
    std::printf("  %-10s %d rank%s  exit %d  (%.1f s)%s\n", name.c_str(), np, np == 1 ? " " : "s", rc, seconds,
                rc == 0 ? "" : fmt::format("  {}", record.value("error", std::string())).c_str());
    std::fflush(stdout);
    return rc;
  }

  std::vector<std::string> evidence_sets(int64_t checkpoint_every, double watchdog) const {
    return {"--set", "evidence.activation_digests=true", "--set",
            fmt::format("evidence.checkpoint_every={}", checkpoint_every), "--set",
            fmt::format("evidence.keep_last={}", config_.train.steps + 1), "--set",
            fmt::format("evidence.watchdog_seconds={}", watchdog), "--expect-contract", o_.out + "/contract.json"};
  }

  // Stage 4's starting point: the parallel run's step-k checkpoint and its evidence prefix.
  Status prepare_recovery() const {
    const std::string from = o_.out + "/parallel", to = o_.out + "/recovery";
    const ckpt::CheckpointPaths src(from), dst(to);
    SP_ASSIGN_OR_RETURN(const ckpt::Manifest m, ckpt::read_manifest(src, k_));
    std::error_code ec;
    fs::create_directories(dst.root(), ec);
    fs::copy(src.step_dir(k_), dst.step_dir(k_), fs::copy_options::recursive, ec);
    if (ec) return io_error("cannot copy '{}' to '{}': {}", src.step_dir(k_), dst.step_dir(k_), ec.message());
    SP_RETURN_IF_ERROR(write_file_atomic(dst.latest(), ckpt::Latest{k_, m.digest}.to_text()));
    for (const char* f : {"checksums.jsonl", "metrics.jsonl"}) {
      fs::copy_file(from + "/" + f, to + "/" + f, ec);
      if (ec) return io_error("cannot copy '{}/{}': {}", from, f, ec.message());
    }
    return Status();
  }

  int run() {
    const parallel::ParallelConfig& pc = config_.parallel;
    const int n = pc.world();
    const bool ckpt_fault = is_ckpt_fault(fault_.kind);
    std::printf("shardproof prove: %s, dp %d × tp %d × pp %d, zero %d, %lld steps; fault %s; checkpoint at step %lld\n",
                config_.name.c_str(), pc.dp, pc.tp, pc.pp, pc.zero, static_cast<long long>(config_.train.steps),
                fault_.to_string().c_str(), static_cast<long long>(k_));
    std::printf("[1/4] contract: freeze config, data, build and versions\n");
    if (stage("contract", n, {"--out", o_.out, "--contract-only"}) != 0) return finish();
    std::printf("[2/4] reference: one device, then the parallel configuration (checkpoint at step %lld)\n",
                static_cast<long long>(k_));
    auto ref = evidence_sets(0, 120);
    ref.insert(ref.end(), {"--out", o_.out + "/reference", "--set", "parallel.dp=1", "--set", "parallel.tp=1", "--set",
                           "parallel.pp=1", "--set", "parallel.zero=0", "--set", "parallel.schedule=1f1b", "--set",
                           "parallel.virtual_stages=1"});
    if (stage("reference", 1, ref) != 0) return finish();
    auto par = evidence_sets(k_, 120);
    par.insert(par.end(), {"--out", o_.out + "/parallel"});
    if (stage("parallel", n, par) != 0) return finish();
    std::printf("[3/4] fault: the same contract with %s\n", fault_.to_string().c_str());
    auto flt = evidence_sets(ckpt_fault ? k_ : 0, 20);
    flt.insert(flt.end(), {"--out", o_.out + "/fault", "--fault", fault_.to_string()});
    stage("fault", n, flt);  // expected to fail for some faults: its ending is evidence
    if (o_.no_recovery) {
      std::printf("[4/4] recovery: skipped (--no-recovery): the gate cannot pass\n");
      return finish();
    }
    std::printf("[4/4] recovery: no fault, resume from the step-%lld checkpoint\n", static_cast<long long>(k_));
    if (Status s = prepare_recovery(); !s.ok()) {
      prove_["stages"].push_back({{"name", "recovery"}, {"exit_code", 1}, {"error", s.message()}});
      (void)write_file_atomic(o_.out + "/prove.json", prove_.dump(2) + "\n");
      return finish();
    }
    auto rec = evidence_sets(0, 120);
    rec.insert(rec.end(), {"--out", o_.out + "/recovery", "--resume", "required"});
    stage("recovery", n, rec);
    return finish();
  }

  // Seal, derive the gate from the files, write gate.json and summary.md, print the verdict.
  int finish() {
    (void)write_file_atomic(o_.out + "/prove.json", prove_.dump(2) + "\n");
    if (Status s = parallel::seal_bundle(o_.out); !s.ok()) return report_status(s);
    auto verdict = parallel::derive_gate(o_.out);
    if (!verdict.ok()) {
      std::printf("verdict: FAIL (%s)\nbundle: %s\n", verdict.status().message().c_str(), o_.out.c_str());
      return 1;
    }
    (void)write_file_atomic(o_.out + "/first_divergence.json", verdict->divergence.to_json().dump(2) + "\n");
    (void)write_file_atomic(o_.out + "/gate.json", verdict->gate.to_json().dump(2) + "\n");
    const std::string title = o_.title.empty() ? "shardproof prove" : o_.title;
    (void)write_file_atomic(o_.out + "/summary.md", verdict->gate.summary_markdown(title, verdict->notes));
    print_verdict(*verdict, o_.out);
    // The HTML report, derived from the sealed files like summary.md (docs/report.md).
    if (auto r = report::write_report(o_.out); r.ok())
      std::printf("report: %s/%s\n", o_.out.c_str(), report::kReportFileName);
    else
      std::printf("report: not written: %s\n", r.status().message().c_str());
    return verdict->gate.passed() ? 0 : 1;
  }

 private:
  const ProveOptions& o_;
  std::string root_;
  parallel::RunConfig config_;
  evidence::FaultSpec fault_;
  int64_t k_;
  json prove_;
};

}  // namespace

void print_verdict(const parallel::ProofVerdict& v, const std::string& bundle) {
  for (const evidence::Criterion& c : v.gate.criteria)
    std::printf("  %s %-48s %s%s\n", !c.required ? "(i) " : (c.passed ? "ok  " : "FAIL"), c.name.c_str(),
                c.measured.c_str(), c.detail.empty() || c.passed ? "" : fmt::format("\n       {}", c.detail).c_str());
  std::printf("%s\nverdict: %s\nbundle: %s (read summary.md first)\n", v.divergence.line().c_str(),
              v.gate.passed() ? "PASS" : "FAIL", bundle.c_str());
  std::fflush(stdout);
}

int run_prove(const ProveOptions& o) {
  if (launched_by_mpi())
    return report_status(invalid_argument("shardproof prove is the driver; do not start it under mpirun")
                             .with_hint("run `shardproof prove ...` directly: it launches mpirun for each stage"));
  const std::string root = o.root.empty() ? default_root() : o.root;
  auto config = load_run_config(root, o.preset, o.config, o.sets);
  if (!config.ok()) return report_status(config.status());
  const parallel::ParallelConfig& pc = config->parallel;
  if (auto plan = parallel::Plan::make(*config, pc.world()); !plan.ok()) return report_status(plan.status());
  const int64_t steps = config->train.steps;
  const int64_t k = config->prove.checkpoint_step > 0 ? config->prove.checkpoint_step : steps / 2;
  if (k < 1 || k >= steps)
    return report_status(invalid_argument("prove.checkpoint_step = {} must lie in [1, train.steps = {})", k, steps)
                             .with_hint("the recovery checkpoint needs steps before and after it"));
  std::string spec = !o.fault.empty() ? o.fault : !config->prove.fault.empty() ? config->prove.fault : default_fault(pc);
  auto fault = evidence::parse_fault(spec);
  if (!fault.ok()) return report_status(fault.status());
  if (!fault->any()) return report_status(invalid_argument("--fault: stage 3 needs a fault from the catalogue"));
  // Without an explicit step the fault acts right after the recovery checkpoint (a checkpoint fault
  // damages that checkpoint itself).
  if (spec.find('@') == std::string::npos) fault->step = is_ckpt_fault(fault->kind) ? k - 1 : k;
  parallel::RunConfig fault_config = *config;
  if (is_ckpt_fault(fault->kind)) fault_config.evidence.checkpoint_every = k;
  auto plan = parallel::Plan::make(fault_config, pc.world());
  if (Status s = parallel::check_fault_for_run(*fault, fault_config, *plan); !s.ok()) return report_status(s);
  if (o.out.empty()) return report_status(invalid_argument("--out is required"));
  std::error_code ec;
  if (fs::exists(o.out, ec) && !fs::is_empty(o.out, ec))
    return report_status(invalid_argument("--out '{}' already exists and is not empty", o.out)
                             .with_hint("a proof bundle is never overwritten: choose a new directory"));
  fs::create_directories(o.out + "/logs", ec);
  if (ec) return report_status(io_error("cannot create '{}': {}", o.out, ec.message()));
  return Protocol(o, root, *config, *fault, k).run();
}

void register_prove(CLI::App& app, CommandResult& result) {
  auto o = std::make_shared<ProveOptions>();
  CLI::App* cmd = app.add_subcommand("prove", "Run the four-stage proof protocol and its gate (docs/prove.md)");
  cmd->add_option("--preset", o->preset, "Preset in configs/ (default: tiny)");
  cmd->add_option("--config", o->config, "Run configuration file (TOML)");
  cmd->add_option("--set", o->sets, "Override a key: --set parallel.dp=2 (repeatable)");
  cmd->add_option("--fault", o->fault, "Stage-3 fault NAME[@STEP][:RANK] (docs/faults.md); default: [prove].fault");
  cmd->add_option("--out", o->out, "Bundle directory (new)")->required();
  cmd->add_option("--root", o->root, "Repository root for configs/ and data/ (default: the source tree)");
  cmd->add_option("--cache", o->cache, "Prepared-data cache directory");
  cmd->add_flag("--quiet", o->quiet, "No per-step progress in the stage logs");
  cmd->add_flag("--no-recovery", o->no_recovery, "Skip stage 4 (the gate then fails: recovery is required)");
  cmd->callback([o, &result] { result.exit_code = run_prove(*o); });
}

}  // namespace sp::cli
