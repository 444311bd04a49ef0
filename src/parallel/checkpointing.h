// Checkpointing glue between the Engine and ckpt/ (docs/checkpoints.md): save this rank's state at a
// step boundary; at start-up apply --resume, find and verify the checkpoint to resume from, check its
// contract key by key, load it into the engine under any topology (resharding), and continue the
// evidence files from where the checkpoint was taken. Every function that takes a communicator is
// collective over it and returns the same Status on every rank.
// Saving and loading are checkpointing.cc, choosing the checkpoint to resume from checkpointing_resume.cc.
// Not the format or the commit protocol (ckpt/save.h) and not the training loop (train_loop.cc).
// Invariant: a run resumed from step k writes exactly the records, losses and weights that the
// uninterrupted run wrote from step k on (bitwise, for deterministic-mode strategies).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/manifest.h"
#include "ckpt/save.h"
#include "comm/communicator.h"
#include "comm/trace_context.h"
#include "core/status.h"
#include "evidence/bundle_paths.h"

namespace sp::parallel {

class Engine;

// auto: resume if a committed checkpoint exists, else start fresh (saying which);
// required: refuse to start without one; never: refuse to start if the run directory holds any.
enum class ResumeMode { kAuto, kRequired, kNever };
Result<ResumeMode> parse_resume_mode(std::string_view text);

struct ResumeOptions {
  ResumeMode mode = ResumeMode::kAuto;
  bool fallback_previous = false;  // a damaged newest checkpoint: use the previous good one, saying so
  // --convert-precision: resume a checkpoint saved in another train.precision / grad_dtype (its fp32
  // master weights and AdamW moments are the state in every precision; docs/checkpoints.md).
  bool convert_precision = false;
};

struct ResumePlan {
  bool resume = false;
  int64_t step = 0;         // steps already taken: training continues at this step
  ckpt::Manifest manifest;  // verified (digest, every shard's size and SHA-256, contract)
  std::string dir;          // the step directory
};

// Collective over `world`, before any evidence file is opened. `contract` is this run's contract
// (evidence/contract.h); the checkpoint's must equal it except for the topology and evidence keys.
Result<ResumePlan> plan_resume(comm::Communicator& world, const std::string& run_dir, const nlohmann::json& contract,
                               const ResumeOptions& options);

// Collective. The checkpoint `step` of another run (an anchored replay's reference, docs/equivalence.md
// §anchored), fully verified like a resume candidate, with a contract equal to this run's up to the
// topology and evidence settings; load it with load_checkpoint.
Result<ResumePlan> plan_anchor(comm::Communicator& world, const std::string& anchor_dir, int64_t step,
                               const nlohmann::json& contract);

// Collective. Truncates checksums.jsonl and metrics.jsonl back to the prefixes the checkpoint
// recorded (refusing files that no longer start with them), and moves trace/ and timeline/ of the
// interrupted process to segments/resume-NNNNNN/ (their sequence numbers restart with the process).
Status prepare_evidence_for_resume(comm::Communicator& world, const std::string& run_dir, const ResumePlan& plan);

// Collective over the engine's world. Fills every parameter and both AdamW moments this rank holds
// from the checkpoint (whatever topology saved it), restores the optimizer step count and the data
// cursor, and re-gathers ZeRO-1/2 replicas.
Status load_checkpoint(Engine& engine, comm::Communicator& world, comm::TraceContext& trace, const ResumePlan& plan);

struct CheckpointOptions {
  int64_t keep_last = 2;
  std::optional<ckpt::SaveFault> fault;
  Status precondition;  // this rank's reason not to save (ckpt::SaveRequest::precondition)
  // Evidence files whose prefix the manifest records (cut back to it on resume), relative to the run.
  std::vector<std::string> evidence_files = {std::string(evidence::kChecksumsFile),
                                             std::string(evidence::kMetricsFile)};
};
// Collective. Saves the state after `steps_done` steps to run_dir/checkpoints/step-NNNNNN.
Result<ckpt::SaveOutcome> save_checkpoint(Engine& engine, comm::Communicator& world, comm::TraceContext& trace,
                                          const std::string& run_dir, int64_t steps_done,
                                          const nlohmann::json& contract, const CheckpointOptions& options);

}  // namespace sp::parallel
