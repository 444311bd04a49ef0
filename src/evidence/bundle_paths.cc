#include "evidence/bundle_paths.h"

#include <fmt/format.h>

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
