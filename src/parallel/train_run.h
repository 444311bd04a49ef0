// Internal to parallel/: what one rank holds between the phases of run_training (trainer.h), shared by
// trainer.cc (phases 1–4 and 6: validate and plan, prepare the data, open the evidence, initialize or
// resume, finish) and train_loop.cc (phase 5: the training loop, or the anchored replay). Not an interface.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "ckpt/hf_weights.h"
#include "comm/agree.h"
#include "comm/trace_writer.h"
#include "comm/watchdog.h"
#include "core/check.h"
#include "core/dir_lock.h"
#include "core/json_io.h"
#include "data/token_dataset.h"
#include "evidence/activations.h"
#include "evidence/bundle_paths.h"
#include "evidence/checksums.h"
#include "parallel/engine.h"
#include "parallel/trainer.h"

namespace sp::parallel::train_detail {

// Removes the fatal-error hook when the run ends (installed by open_evidence).
struct BeforeFatalReset {
  ~BeforeFatalReset() { set_before_fatal({}); }
};

// What validation fixes before anything else happens: the plan and the process grid.
struct Setup {
  plan::RunPlan plan;
  comm::ProcessGrid grid;
};

// Everything one rank holds between the phases of a run. Members are destroyed in reverse order: the
// engine first, then the communicators (which point at the trace writer and the watchdog), then the
// evidence files.
struct Run {
  Run(const config::RunConfig& c, const TrainOptions& o, Setup s, int r)
      : config(c), opt(o), paths(o.out_dir), plan(std::move(s.plan)), grid(std::move(s.grid)), rank(r) {}
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  const config::RunConfig& config;
  const TrainOptions& opt;
  const evidence::RunPaths paths;
  // Fixed by validate_and_plan, but for train.gemm32 = "auto", which prepare_data resolves to rank 0's pick
  // before the contract is frozen (nothing reads it before).
  plan::RunPlan plan;
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

// 5. The training loop: a step, its evidence records, the evaluation when due, a checkpoint when due.
Status train_loop(Run& run, TrainSummary& summary);
// 5b. The anchored replay (TrainOptions::anchor_from).
Status anchored_loop(Run& run, TrainSummary& summary);

}  // namespace sp::parallel::train_detail
