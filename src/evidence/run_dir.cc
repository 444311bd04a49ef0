#include "evidence/run_dir.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <span>

#include "ckpt/names.h"
#include "core/file_io.h"
#include "evidence/bundle_paths.h"

namespace sp::evidence {
namespace fs = std::filesystem;
namespace {

// Every top-level name a run bundle (RunPaths) or a proof bundle (ProofPaths) writes.
constexpr std::string_view kRunNames[] = {
    kContractFile,        kTopologyFile,   kCommPredictedFile, kChecksumsFile,  kMetricsFile, kLedgerFile,
    kTimelineDir,         kActivationsDir, kTraceDir,          kCheckpointsDir, kSegmentsDir, kProveFile,
    kFirstDivergenceFile, kGateFile,       kSummaryFile,       kSealFile,       kLogsDir,     kReferenceStage,
    kParallelStage,       kFaultStage,     kRecoveryStage};
// What `prove` writes into its bundle before the contract stage runs there.
constexpr std::string_view kProofDriverNames[] = {kLogsDir, kProveFile};

bool one_of(std::string_view name, std::span<const std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A run's file, or the temporary of one (write_file_atomic: "<name>.tmp.<pid>").
bool is_run_entry(const std::string& name) {
  if (one_of(name, kRunNames)) return true;
  const size_t tmp = name.find(".tmp.");
  return tmp != std::string::npos && one_of(std::string_view(name).substr(0, tmp), kRunNames);
}

std::optional<std::string> seal_at_or_above(const std::string& dir) {
  std::error_code ec;
  fs::path p = resolved_path(dir);  // a symlink into a sealed bundle is the bundle
  for (;;) {
    const fs::path seal = p / kSealFile;
    if (fs::exists(seal, ec)) return seal.string();
    if (!p.has_parent_path() || p.parent_path() == p) return std::nullopt;
    p = p.parent_path();
  }
}

std::string listing(const std::vector<std::string>& names) {
  std::vector<std::string> shown;
  for (size_t i = 0; i < names.size() && i < 5; ++i) shown.push_back(names[i]);
  return fmt::format("{}{}", fmt::join(shown, ", "),
                     names.size() > shown.size() ? fmt::format(", … ({} in all)", names.size()) : "");
}

// What a run or a proof bundle always writes at its top level (a plan or an HF export never does).
constexpr std::string_view kRunMarkers[] = {kContractFile, kProveFile, kChecksumsFile, kMetricsFile, kTopologyFile};

// The closest directory at or above `resolved` that holds a run's or a proof bundle's files.
std::optional<std::string> run_dir_at_or_above(const fs::path& resolved) {
  std::error_code ec;
  for (fs::path p = resolved;; p = p.parent_path()) {
    for (std::string_view marker : kRunMarkers)
      if (fs::is_regular_file(p / marker, ec)) return p.string();
    if (!p.has_parent_path() || p.parent_path() == p) return std::nullopt;
  }
}

}  // namespace

std::string resolved_path(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path, ec);
  return p.lexically_normal().string();
}

Status refuse_evidence_target(const std::string& path, std::string_view flag) {
  const std::string resolved = resolved_path(path);
  const std::string shown = resolved == fs::absolute(path).lexically_normal().string()
                                ? fmt::format("'{}'", path)
                                : fmt::format("'{}' (= '{}')", path, resolved);
  if (const auto seal = seal_at_or_above(resolved))
    return invalid_argument("{} {} lies in a sealed proof bundle ('{}'): a sealed bundle is never written to", flag,
                            shown, *seal)
        .with_hint(fmt::format("choose a {} outside the bundle", flag));
  if (const auto run = run_dir_at_or_above(resolved))
    return invalid_argument(
               "{} {} lies in the run directory '{}' (it holds a run's evidence): only the run itself writes there",
               flag, shown, *run)
        .with_hint(fmt::format("choose a {} outside every run and proof directory", flag));
  return Status();
}

Result<RunDirContents> inspect_run_dir(const std::string& dir) {
  RunDirContents c;
  c.seal = seal_at_or_above(dir);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return c;
  if (!fs::is_directory(dir, ec)) return invalid_argument("'{}' exists and is not a directory", dir);
  c.exists = true;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == kLockFile) continue;
    (is_run_entry(name) ? c.run_entries : c.foreign).push_back(fs::is_directory(e.path(), ec) ? name + "/" : name);
  }
  if (ec) return io_error("cannot list '{}': {}", dir, ec.message());
  std::sort(c.run_entries.begin(), c.run_entries.end());
  std::sort(c.foreign.begin(), c.foreign.end());
  const ckpt::CheckpointPaths checkpoints(dir);
  if (path_exists(checkpoints.root())) {
    auto l = ckpt::list_checkpoints(checkpoints);
    c.has_checkpoints = path_exists(checkpoints.latest()) || (l.ok() && !l->steps.empty());
  }
  c.proof_driver_only = !c.run_entries.empty();
  for (const std::string& e : c.run_entries) {
    const std::string bare = e.back() == '/' ? e.substr(0, e.size() - 1) : e;
    c.proof_driver_only = c.proof_driver_only && one_of(bare, kProofDriverNames);
  }
  return c;
}

Result<DirectoryLock> claim_run_dir(const std::string& dir, const RunDirClaim& claim) {
  SP_ASSIGN_OR_RETURN(RunDirContents before, inspect_run_dir(dir));
  if (before.seal)
    return invalid_argument("'{}' is {} sealed proof bundle ('{}'): a sealed bundle is never written to", dir,
                            fs::path(*before.seal).parent_path() == fs::path(resolved_path(dir)) ? "a" : "inside a",
                            *before.seal)
        .with_hint("choose another --out directory (`shardproof verify` reads a bundle; --overwrite does not apply)");
  SP_RETURN_IF_ERROR(make_directories(dir));
  SP_ASSIGN_OR_RETURN(DirectoryLock lock, DirectoryLock::acquire((fs::path(dir) / kLockFile).string(), dir));
  // A run that ends before it writes anything leaves the directory as it found it (absent, or empty).
  lock.remove_if_alone(dir, !before.exists);
  SP_ASSIGN_OR_RETURN(const RunDirContents c, inspect_run_dir(dir));  // again, now that it is ours
  if (!c.foreign.empty())
    return invalid_argument(
               "'{}' holds {} that no shardproof run writes ({}); a run is written only into a new, "
               "empty or run directory",
               dir, c.foreign.size() == 1 ? "an entry" : "entries", listing(c.foreign))
        .with_hint("choose another --out directory (--overwrite clears only a run's own files)");
  if (c.run_entries.empty()) return lock;
  if (claim.overwrite) {
    for (const std::string& e : c.run_entries) {
      std::error_code ec;
      fs::remove_all(fs::path(dir) / e, ec);
      if (ec) return io_error("--overwrite: cannot remove '{}': {}", (fs::path(dir) / e).string(), ec.message());
    }
    SP_RETURN_IF_ERROR(fsync_directory(dir));
    return lock;
  }
  if (claim.contract_only && c.proof_driver_only) return lock;  // prove's contract stage
  if (c.has_checkpoints || claim.resume_required) return lock;  // the resume decides (checkpointing.h)
  return invalid_argument(
             "'{}' holds another run ({}) and no checkpoint to continue; a run never writes over "
             "another",
             dir, listing(c.run_entries))
      .with_hint("train into a new --out directory, or add --overwrite to clear this one first");
}

}  // namespace sp::evidence
