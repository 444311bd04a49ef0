// The crash-safe commit of one checkpoint by every rank of a job (docs/checkpoints.md §Commit):
//   1. every rank's precondition is agreed on (none failed: go on); rank 0 removes leftover
//      *.partial / *.deleting directories and creates step-N.partial/;
//   2. every rank writes and fsyncs its shard there (hashed from memory while it is built);
//      agreement: any failure is reported on every rank, naming the rank and the file, and
//      rank 0 removes the partial directory (LATEST and committed checkpoints untouched);
//   3. rank 0 gathers sizes and SHA-256s, writes and fsyncs manifest.json, renames
//      step-N.partial -> step-N, fsyncs checkpoints/, then moves LATEST (temp + rename + fsync);
//      only then does retention delete old checkpoints; a final agreement ends the save.
// Not the engine glue (parallel/checkpointing.h) and not a loader (load.h, reshard.h).
// Invariant: at every instant a crash leaves LATEST naming a complete, verifiable checkpoint (or
// absent before the first commit); a committed step directory is never modified.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/manifest.h"
#include "ckpt/shard.h"
#include "comm/communicator.h"

namespace sp::ckpt {

// Points of a save where a fault can be injected (tests; `--fault`, docs/checkpoints.md §Faults).
enum class SavePhase { kShardWrite, kBeforeManifest, kBeforeRename, kBeforeLatest, kAfterLatest };
std::string_view save_phase_name(SavePhase phase);  // "shard-write", "before-manifest", ...

// ckpt-kill-<phase>[@STEP][:RANK]   SIGKILL the rank at that point of the save
// ckpt-enospc[@STEP][:RANK]         the rank's shard write fails with ENOSPC (a full disk)
// Ranks other than 0 have no manifest, rename or LATEST of their own: for those phases they are
// killed right before the save's final agreement, while rank 0 commits.
struct SaveFault {
  bool kill = true;  // false: fail the shard write instead
  SavePhase phase = SavePhase::kShardWrite;
  int64_t step = -1;  // −1: any step
  int rank = -1;      // −1: every rank
  bool matches(SavePhase p, int64_t s, int r) const {
    return p == phase && (step < 0 || step == s) && (rank < 0 || rank == r);
  }
};
// nullopt when `spec` is not a checkpoint fault (another module's fault name); an error when it is
// one but malformed.
Result<std::optional<SaveFault>> parse_save_fault(std::string_view spec);

struct SaveRequest {
  std::string run_dir;
  int64_t step = 0;    // steps completed
  std::string coords;  // this rank's grid coordinates, "dp0.tp1.pp0"
  int tp_rank = 0;
  std::vector<StateSpan> spans;          // what this rank stores; empty for a replica that does not store
  Manifest manifest;                     // rank 0: contract, topology, optimizer, cursor, evidence (the rest is filled)
  std::vector<std::string> rank_coords;  // rank 0: coords of every world rank, for the manifest
  int64_t keep_last = 2;                 // ≥ 1
  std::optional<SaveFault> fault;
  // This rank's reason not to commit (e.g. an evidence file it could not write: the manifest would
  // record an incomplete prefix): folded into the save's first agreement, so nothing is written.
  Status precondition;
};

struct SaveOutcome {
  bool kept_existing = false;    // step-N already held this exact checkpoint: nothing rewritten
  std::string dir;               // the committed step directory
  uint64_t bytes = 0;            // all shards (rank 0; 0 elsewhere)
  std::vector<int64_t> deleted;  // steps removed by retention (rank 0)
  double seconds = 0.0;
};

// Collective over `world`: every rank returns the same Status (comm/agree.h).
Result<SaveOutcome> save_checkpoint(comm::Communicator& world, const SaveRequest& request);

}  // namespace sp::ckpt
