// The output directory of a run (`train --out`): what it already holds, judged by the names runs and
// proof bundles write (bundle_paths.h), and the claim a run makes on it before writing anything —
// refuse a sealed proof bundle always, take the directory's lock for the run's lifetime, then refuse
// or clear a directory that holds another run. Not the resume logic (parallel/checkpointing.h decides
// what to continue) and not the file names themselves. Invariant: a run writes into a directory only
// while it holds its lock, and never into one that holds another run's files unless it was asked to
// clear them (--overwrite) or to continue its checkpoints (--resume). Reference: docs/checkpoints.md
// §"Output directories".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/dir_lock.h"
#include "core/status.h"

namespace sp::evidence {

inline constexpr std::string_view kLockFile = ".shardproof.lock";

struct RunDirContents {
  bool exists = false;
  std::vector<std::string> run_entries;  // names a run or a proof bundle writes (sorted)
  std::vector<std::string> foreign;      // anything else (sorted)
  bool has_checkpoints = false;          // checkpoints/ holds LATEST or a step directory
  bool proof_driver_only = false;        // only what `prove` writes before its contract stage (logs/, prove.json)
  std::optional<std::string> seal;       // the bundle.sha256 of this directory or of a directory above it
};
Result<RunDirContents> inspect_run_dir(const std::string& dir);

struct RunDirClaim {
  bool overwrite = false;        // --overwrite: clear a directory that holds another run first
  bool resume_required = false;  // --resume required: the resume itself refuses a directory without checkpoints
  bool contract_only = false;    // --contract-only: `prove`'s first stage, into its bundle's root
};
// Where a command that is not a run writes `path` (plan --out DIR, report --out FILE, ckpt export --hf DIR or
// --out FILE; `flag` names the option): refused when it lies in a sealed proof bundle or in a run's
// directory (a directory holding a contract, a prove.json, checksums or metrics): `path` and every directory
// above it are judged after symlinks are resolved, so a link into a bundle is refused like the bundle.
// Not for `train` (claim_run_dir) nor for a command's own default file inside the bundle it reads.
Status refuse_evidence_target(const std::string& path, std::string_view flag);

// `path` with every symlink resolved (the parts that exist), absolute and normal: what a guard judges.
std::string resolved_path(const std::string& path);

// Rank 0 of a run, before anything is written: creates `dir`, refuses a sealed proof bundle (even
// with --overwrite), takes DIR/.shardproof.lock (a concurrent run fails naming the holder's pid),
// then refuses a directory holding files no shardproof run writes, and one holding another run unless
// the claim allows it (overwrite: cleared now, keeping the lock; checkpoints: the resume logic
// continues them or, under --resume never, refuses; contract_only: a proof bundle's own driver files). The lock is held
// until the result is destroyed.
Result<DirectoryLock> claim_run_dir(const std::string& dir, const RunDirClaim& claim);

}  // namespace sp::evidence
