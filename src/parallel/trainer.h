// run_training: one `shardproof train` on every rank of an MPI job, from a validated config::RunConfig to a
// complete evidence bundle (evidence/bundle_paths.h, docs/formats/): contract.json, topology.json,
// comm_predicted.json, trace/, timeline/, checksums.jsonl, metrics.jsonl, ledger.json, activations/
// and checkpoints/. It runs six phases, each a function: validate and plan, prepare the data and freeze
// the contract, open the evidence, initialize or resume (trainer.cc), the training loop (train_loop.cc),
// finish (trainer.cc).
// Every rank calls it; every rank returns the same Status. Validation runs first and fails
// identically on every rank before any communication or file write; a run whose evidence could not
// be written completely fails, naming the file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ckpt/save.h"
#include "comm/mpi_scope.h"
#include "config/run_config.h"
#include "core/status.h"
#include "evidence/faults.h"
#include "parallel/checkpointing.h"
#include "plan/run_plan.h"

namespace sp::parallel {

struct TrainOptions {
  std::string out_dir;
  bool overwrite = false;      // --overwrite: clear an --out that holds another run (evidence/run_dir.h)
  std::string root_dir = ".";  // resolves relative data paths
  std::string cache_dir;       // prepared data cache; default <root>/.shardproof-cache
  bool progress = true;        // live progress line on rank 0
  // Checkpoints (parallel/checkpointing.h, docs/checkpoints.md).
  ResumeOptions resume;                       // --resume auto|required|never, --fallback-previous
  int64_t stop_after = 0;                     // stop after this many steps as if interrupted; 0 = train.steps
  std::optional<ckpt::SaveFault> ckpt_fault;  // --fault ckpt-...: injected into checkpoint saves
  std::string init_from;                      // consolidated weights (ckpt export) to start a fresh run from
  std::vector<int64_t> checkpoint_at;  // --checkpoint-at: also save the state at these steps (0: the initial state)
  // The proof protocol (docs/prove.md).
  evidence::FaultSpec fault;    // --fault NAME[@step][:rank]: one catalogue fault (docs/faults.md)
  std::string expect_contract;  // --expect-contract FILE: refuse to run under any other contract
  bool contract_only = false;   // --contract-only: prepare data, write contract.json, stop
  // Anchored replay (docs/equivalence.md §anchored): instead of one trajectory, for every anchor step a
  // load the state of run `anchor_from` at a − anchor_warmup (its checkpoint), run steps a − warmup … a
  // and record step a only. Every recorded step then starts (up to `anchor_warmup` steps of this
  // topology) from the reference's own state, so its single-step tolerance applies.
  std::string anchor_from;
  std::vector<int64_t> anchors;
  int64_t anchor_warmup = 0;
  // --anchor-evals: after the anchors, evaluate the held-out split from `anchor_from`'s state at each of these
  // evaluation points (s: its checkpoint s + 1, the state its eval after step s saw; −1: the initial state),
  // recorded as {"step": s, "eval_loss", "anchor": s + 1}.
  std::vector<int64_t> anchor_evals;
};

struct TrainSummary {
  double final_loss = 0.0;
  std::optional<double> final_eval_loss;    // the last evaluation of this process; none when none ran
  std::optional<double> initial_eval_loss;  // before step 0; none after a resume or without an eval set
  double tokens_per_second = 0.0;
  int64_t first_step = 0;  // the resumed checkpoint's step, else 0
  int64_t steps = 0;       // steps completed (the run's, counting resumed ones)
};

Result<TrainSummary> run_training(const config::RunConfig& config, const TrainOptions& options, comm::MpiScope& mpi);

// Every rule `train` checks of a configuration before it claims --out, for a run of `world` ranks: the plan
// (plan::RunPlan::make) and the vocabulary the data's tokenizer can have. `config show` reports the same.
Result<plan::RunPlan> plan_run(const config::RunConfig& config, int world);

}  // namespace sp::parallel
