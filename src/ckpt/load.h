// Finding and verifying checkpoints before any state is touched: LATEST, the manifest and its
// digest, every shard's size and SHA-256, and (for `ckpt verify`) every shard's metadata and the
// exact coverage of every logical tensor. Per-process file checks only; the collective order in
// which ranks run them is parallel/checkpointing.h's.
// Invariant: a checkpoint that passes verify_checkpoint loads on any topology of the same model;
// every refusal names the file and, where it can be found, the damaged tensor.
// Reference: docs/checkpoints.md §Resuming, docs/formats/checkpoint.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/manifest.h"
#include "ckpt/names.h"

namespace sp::ckpt {

// Hints of refused checkpoints. They name no flag: each command adds its own remedy (train
// --fallback-previous, ckpt --step N).
inline constexpr std::string_view kOlderCheckpointHint =
    "the checkpoint directory is incomplete; an older committed checkpoint may still be usable";
inline constexpr std::string_view kDamagedCheckpointHint =
    "the file was damaged after the checkpoint was committed; an older committed checkpoint may still be usable";

Result<Latest> read_latest(const CheckpointPaths& paths);
// step-N/manifest.json, parsed and digest-checked; its step must be N.
Result<Manifest> read_manifest(const CheckpointPaths& paths, int64_t step);

// Size and chunk SHA-256s (hashed on every CPU this process may use) of the shards of `manifest`
// whose rank r satisfies r % stride == offset (all with the defaults). A mismatch names the file,
// the byte range, expected vs actual, and the damaged tensor when found.
Status verify_shard_files(const std::string& step_dir, const Manifest& manifest, int offset = 0, int stride = 1);
// After a SHA-256 mismatch: which stored tensor (or the header) differs from what was written.
std::string locate_shard_damage(const std::string& shard_path);

// The checkpoints load may use, newest first: LATEST's step, then (fallback only) every older
// committed step directory. Step directories newer than LATEST never finished their commit and are
// not candidates.
struct Candidates {
  std::vector<int64_t> steps;
  std::optional<Latest> latest;      // parsed LATEST, when it exists and parses
  Status latest_status;              // why LATEST is unusable (not_found when absent)
  std::vector<int64_t> uncommitted;  // step dirs newer than LATEST (or all of them without LATEST)
  bool any_step_dirs = false;
};
Result<Candidates> find_candidates(const CheckpointPaths& paths, bool fallback_previous);

// Full single-process check of one checkpoint (`shardproof ckpt verify`): manifest, LATEST agreement
// (when `step` is LATEST's), shard files (chunk and whole-file digests), shard metadata against the
// contract's model, coverage.
Status verify_checkpoint(const CheckpointPaths& paths, int64_t step);

}  // namespace sp::ckpt
