#include "ckpt/names.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "ckpt/format.h"
#include "core/check.h"

namespace sp::ckpt {
namespace fs = std::filesystem;
namespace {

// Digits after `prefix`, canonical (no sign, no leading '+'; the width is at least `min_digits` and
// longer only when the number needs it), at most 12 digits.
std::optional<int64_t> parse_number(std::string_view name, std::string_view prefix, std::string_view suffix,
                                    int min_digits) {
  if (name.size() < prefix.size() + suffix.size() || name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - suffix.size()) != suffix)
    return std::nullopt;
  const std::string_view digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() < static_cast<size_t>(min_digits) || digits.size() > 12) return std::nullopt;
  int64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  // Canonical: "step-0000004" (7 digits for 4) is not a name this module writes.
  if (digits.size() > static_cast<size_t>(min_digits) && digits[0] == '0') return std::nullopt;
  return v;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string step_dir_name(int64_t step) {
  SP_CHECK(step >= 0 && step <= kMaxStep, "checkpoint step {} outside [0, {}]", step, kMaxStep);
  return fmt::format("{}{:0{}}", kStepPrefix, step, kStepDigits);
}

std::optional<int64_t> parse_step_dir_name(std::string_view name) {
  return parse_number(name, kStepPrefix, "", kStepDigits);
}

std::string shard_file_name(int rank) {
  SP_CHECK(rank >= 0 && rank < kMaxWorld, "shard rank {} outside [0, {})", rank, kMaxWorld);
  return fmt::format("{}{:0{}}{}", kShardPrefix, rank, kRankDigits, kShardSuffix);
}

std::optional<int> parse_shard_file_name(std::string_view name) {
  const auto v = parse_number(name, kShardPrefix, kShardSuffix, kRankDigits);
  if (!v || *v >= kMaxWorld) return std::nullopt;
  return static_cast<int>(*v);
}

Status check_path_component(std::string_view name, std::string_view what) {
  if (name.empty()) return corrupt("{} is an empty file name", what);
  if (name.size() > 255) return corrupt("{} is {} bytes long, more than a file name may be", what, name.size());
  if (name == "." || name == "..") return corrupt("{} {:?} is not a file name", what, name);
  for (char c : name)
    if (c == '/' || c == '\\' || c == '\0')
      return corrupt("{} {:?} is a path, not a file name", what, name)
          .with_hint("checkpoint files are named by the checkpoint format, never by paths taken from a file");
  return Status();
}

CheckpointPaths::CheckpointPaths(std::string run_dir) : run_dir_(std::move(run_dir)) {
  if (run_dir_.empty()) run_dir_.push_back('.');  // (not `= "."`: GCC 12 -Wrestrict false positive)
}

std::string CheckpointPaths::root() const { return (fs::path(run_dir_) / kCheckpointsDir).string(); }
std::string CheckpointPaths::latest() const { return (fs::path(root()) / kLatestFile).string(); }
std::string CheckpointPaths::step_dir(int64_t step) const { return (fs::path(root()) / step_dir_name(step)).string(); }
std::string CheckpointPaths::partial_dir(int64_t step) const { return step_dir(step) + std::string(kPartialSuffix); }
std::string CheckpointPaths::deleting_dir(int64_t step) const { return step_dir(step) + std::string(kDeletingSuffix); }
std::string CheckpointPaths::refused_dir(int64_t step) const { return step_dir(step) + std::string(kRefusedSuffix); }

std::string CheckpointPaths::entry(std::string_view name) const {
  const Status s = check_path_component(name, "checkpoint directory entry");
  SP_CHECK(s.ok(), "{}", s.message());
  return (fs::path(root()) / name).string();
}

std::string CheckpointPaths::run_file(std::string_view name) const {
  const Status s = check_path_component(name, "run file");
  SP_CHECK(s.ok(), "{}", s.message());
  return (fs::path(run_dir_) / name).string();
}

std::string CheckpointPaths::segment_dir(int64_t step, int attempt) const {
  const std::string name = attempt == 0 ? step_dir_name(step) : fmt::format("{}.{}", step_dir_name(step), attempt);
  return (fs::path(run_dir_) / kSegmentsDir / name).string();
}

std::string CheckpointPaths::manifest_in(const std::string& dir) { return (fs::path(dir) / kManifestFile).string(); }
std::string CheckpointPaths::shard_in(const std::string& dir, int rank) {
  return (fs::path(dir) / shard_file_name(rank)).string();
}

Result<CheckpointListing> list_checkpoints(const CheckpointPaths& paths) {
  CheckpointListing out;
  std::error_code ec;
  const std::string root = paths.root();
  if (!fs::exists(root, ec)) return out;
  if (!fs::is_directory(root, ec)) return corrupt("'{}' exists but is not a directory", root);
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == kLatestFile) {
      out.has_latest = true;
    } else if (auto step = parse_step_dir_name(name); step && it->is_directory(ec)) {
      out.steps.push_back(*step);
    } else if (ends_with(name, kPartialSuffix) || ends_with(name, kDeletingSuffix) ||
               name.rfind(std::string(kLatestFile) + ".tmp.", 0) == 0) {
      out.leftovers.push_back(name);
    } else if (ends_with(name, kRefusedSuffix)) {
      out.refused.push_back(name);
    } else {
      out.unknown.push_back(name);
    }
  }
  if (ec) return io_error("cannot list checkpoint directory '{}': {}", root, ec.message());
  std::sort(out.steps.begin(), out.steps.end());
  std::sort(out.leftovers.begin(), out.leftovers.end());
  std::sort(out.refused.begin(), out.refused.end());
  std::sort(out.unknown.begin(), out.unknown.end());
  return out;
}

Result<CheckpointTarget> resolve_checkpoint_target(const std::string& dir) {
  std::error_code ec;
  const fs::path p = fs::path(dir).lexically_normal();
  if (!fs::is_directory(p, ec)) return not_found("'{}' is not a directory", dir);
  if (fs::is_directory(p / kCheckpointsDir, ec)) return CheckpointTarget{p.string(), std::nullopt};
  const fs::path abs = fs::absolute(p, ec);
  const fs::path name = abs.filename().empty() ? abs.parent_path().filename() : abs.filename();
  const fs::path parent = abs.filename().empty() ? abs.parent_path().parent_path() : abs.parent_path();
  if (name == kCheckpointsDir) return CheckpointTarget{parent.string(), std::nullopt};
  if (fs::exists(p / kManifestFile, ec)) {
    const auto step = parse_step_dir_name(name.string());
    if (!step)
      return invalid_argument("'{}' holds a manifest.json but is not named step-NNNNNN", dir)
          .with_hint("pass the run directory (it holds checkpoints/)");
    if (parent.filename() != kCheckpointsDir)
      return invalid_argument("checkpoint '{}' is not inside a '{}' directory", dir, kCheckpointsDir);
    return CheckpointTarget{parent.parent_path().string(), step};
  }
  return not_found("'{}' holds no checkpoints: expected a run directory with {}/ inside", dir, kCheckpointsDir)
      .with_hint("train with --set evidence.checkpoint_every=N to write checkpoints");
}

}  // namespace sp::ckpt
