// ckpt/names: the only module that builds checkpoint paths or parses checkpoint file names.
// It does no I/O beyond listing a directory (list_checkpoints), and knows nothing of file contents.
// Invariant: every name it produces round-trips through its parser, and every component read from
// disk or from a manifest passes check_path_component (no "..", no "/", not absolute, not empty)
// before it is joined to a path. Layout: docs/formats/checkpoint.md §Layout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sp::ckpt {

// RUN/segments/: the per-process trace and timeline files of interrupted processes (segment_dir).
inline constexpr std::string_view kSegmentsDir = "segments";

// "step-000004" (at least kStepDigits digits); a step outside [0, kMaxStep] is an SP_CHECK.
std::string step_dir_name(int64_t step);
// The step of a canonical step directory name; nullopt for anything else (".partial", "step-4", ...).
std::optional<int64_t> parse_step_dir_name(std::string_view name);
// "rank-00003.safetensors"
std::string shard_file_name(int rank);
std::optional<int> parse_shard_file_name(std::string_view name);

// A single file-name component from untrusted input: non-empty, at most 255 bytes, not "." or "..",
// no '/', '\\' or NUL byte. `what` names the field in the error ("manifest shard file").
Status check_path_component(std::string_view name, std::string_view what);

class CheckpointPaths {
 public:
  explicit CheckpointPaths(std::string run_dir);
  const std::string& run_dir() const { return run_dir_; }
  std::string root() const;                     // RUN/checkpoints
  std::string latest() const;                   // RUN/checkpoints/LATEST
  std::string step_dir(int64_t step) const;     // RUN/checkpoints/step-000004
  std::string partial_dir(int64_t step) const;  // RUN/checkpoints/step-000004.partial
  std::string deleting_dir(int64_t step) const;
  std::string refused_dir(int64_t step) const;
  std::string entry(std::string_view name) const;     // RUN/checkpoints/NAME; NAME must be a valid component
  std::string run_file(std::string_view name) const;  // RUN/NAME (evidence files a manifest records)
  // RUN/segments/step-NNNNNN (kSegmentsDir) (attempt 0) or .../step-NNNNNN.A: the interrupted process's per-process
  // evidence (trace/, timeline/) when a run resumes at `step`.
  std::string segment_dir(int64_t step, int attempt) const;
  static std::string manifest_in(const std::string& dir);         // DIR/manifest.json
  static std::string shard_in(const std::string& dir, int rank);  // DIR/rank-NNNNN.safetensors

 private:
  std::string run_dir_;
};

// What RUN/checkpoints holds, by kind of name. A missing directory is an empty listing.
struct CheckpointListing {
  std::vector<int64_t> steps;          // canonical step directories, ascending
  std::vector<std::string> leftovers;  // "*.partial" and "*.deleting" directories and LATEST temp files: ours
  std::vector<std::string> refused;    // "*.refused" directories: kept for inspection
  std::vector<std::string> unknown;    // anything else
  bool has_latest = false;
};
Result<CheckpointListing> list_checkpoints(const CheckpointPaths& paths);

// A directory given on the command line: a run directory (holding checkpoints/), the checkpoints
// directory itself, or one step directory (holding manifest.json; `step` is then set).
struct CheckpointTarget {
  std::string run_dir;
  std::optional<int64_t> step;
};
Result<CheckpointTarget> resolve_checkpoint_target(const std::string& dir);

}  // namespace sp::ckpt
