#include "evidence/bundle_paths.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <filesystem>

namespace sp::evidence {

// Every per-rank evidence file follows the trace's naming (comm/trace_record.h), so one parser reads
// trace/, timeline/ and activations/ alike.
std::string rank_file_name(int world_rank) { return comm::trace_file_name(world_rank); }
std::optional<int> parse_rank_file_name(std::string_view name) { return comm::trace_file_rank(name); }

Result<std::vector<RankFile>> list_rank_files(const std::string& dir, std::vector<std::string>* ignored) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<RankFile> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (const std::optional<int> r = parse_rank_file_name(e.path().filename().string()); r && e.is_regular_file(ec))
      out.push_back({*r, e.path().string()});
    else if (ignored != nullptr)
      ignored->push_back(e.path().string());
  }
  if (ec) return io_error("cannot list '{}': {}", dir, ec.message());
  std::sort(out.begin(), out.end(), [](const RankFile& a, const RankFile& b) { return a.rank < b.rank; });
  if (ignored != nullptr) std::sort(ignored->begin(), ignored->end());
  return out;
}

Status check_bundle_name(std::string_view relative) {
  static constexpr std::array<std::string_view, 19> kFiles = {
      kContractFile,  kCommPredictedFile, kChecksumsFile,       kMetricsFile, kLedgerFile,         kAnchorsFile,
      kTopologyFile,  kProveFile,         kFirstDivergenceFile, kGateFile,    kSummaryFile,        kSealFile,
      kSignatureFile, kDriftFile,         kReportFile,          kCompareFile, kCompareSummaryFile, kPlanFile,
      kLabFile};
  const std::string path(relative);
  const size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string parent = slash == std::string::npos ? "" : path.substr(0, slash);
  const std::string dir = parent.substr(parent.rfind('/') == std::string::npos ? 0 : parent.rfind('/') + 1);
  const auto matches = [&name](std::string_view known) {
    return ::fnmatch(name.c_str(), std::string(known).c_str(), 0) == 0;
  };
  bool known = false;
  if (dir == kTraceDir || dir == kTimelineDir || dir == kActivationsDir)  // rank-NNNNN.jsonl, digits or wildcards
    known = name == "*" || (::fnmatch("rank-*.jsonl", name.c_str(), 0) == 0 &&
                            name.find_first_not_of("0123456789*?[]-", 5) == name.size() - 6);
  else if (dir == kLogsDir)  // logs/<stage>.log (ProofPaths::log_file)
    known = ::fnmatch("*.log", name.c_str(), 0) == 0;
  else if (parent.find(kCheckpointsDir) != std::string::npos)
    known = matches(ckpt::kManifestFile);
  else
    known = std::any_of(kFiles.begin(), kFiles.end(), matches);
  if (known) return Status();
  std::string names;
  for (std::string_view f : kFiles) names += (names.empty() ? "" : ", ") + std::string(f);
  return invalid_argument("'{}' names no bundle file ('{}' is not a name of evidence/bundle_paths.h)", path, name)
      .with_hint(fmt::format("the files are {}; trace/, timeline/ and activations/ hold {}; logs/ <stage>.log", names,
                             rank_file_name(0)));
}

std::string RunPaths::file(std::string_view relative) const { return fmt::format("{}/{}", root_, relative); }
std::string RunPaths::topology() const { return file(comm::kTopologyFileName); }
std::string RunPaths::trace_dir() const { return file(comm::kTraceDirName); }
std::string RunPaths::trace(int world_rank) const { return comm::trace_file_path(root_, world_rank); }
std::string RunPaths::timeline(int world_rank) const {
  return fmt::format("{}/{}", timeline_dir(), rank_file_name(world_rank));
}
std::string RunPaths::activations(int world_rank) const {
  return fmt::format("{}/{}", activations_dir(), rank_file_name(world_rank));
}

std::string stage_file(std::string_view stage, std::string_view name) { return fmt::format("{}/{}", stage, name); }
std::string stage_dir(std::string_view stage, std::string_view name) { return fmt::format("{}/{}/", stage, name); }

std::string ProofPaths::file(std::string_view relative) const { return fmt::format("{}/{}", root_, relative); }
std::string ProofPaths::log_file(std::string_view stage) { return fmt::format("{}/{}.log", kLogsDir, stage); }

bool ProofPaths::is_derived(std::string_view relative) {
  return relative == kGateFile || relative == kSummaryFile || relative == kFirstDivergenceFile ||
         relative == kDriftFile || relative == kReportFile;
}

}  // namespace sp::evidence
