#include "evidence/ledger_report.h"

#include "comm/agree.h"
#include "core/file_io.h"
#include "evidence/bundle_paths.h"

namespace sp::evidence {

std::vector<nlohmann::json> gather_json(comm::Communicator& world, const nlohmann::json& mine) {
  const std::string text = mine.dump();
  const int n = world.size();
  std::vector<int64_t> sizes(static_cast<size_t>(n));
  const int64_t my_size = static_cast<int64_t>(text.size());
  world.all_gather(&my_size, sizes.data(), std::vector<int64_t>(static_cast<size_t>(n), 1), DType::kI64);
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  std::string all(world.rank() == 0 ? static_cast<size_t>(total) : 0, '\0');
  world.gather(text.data(), my_size, world.rank() == 0 ? all.data() : nullptr, sizes, DType::kU8, 0);
  std::vector<nlohmann::json> out;
  if (world.rank() != 0) return out;
  size_t off = 0;
  for (int64_t s : sizes) {
    out.push_back(nlohmann::json::parse(all.substr(off, static_cast<size_t>(s))));
    off += static_cast<size_t>(s);
  }
  return out;
}

Status write_ledger_report(comm::Communicator& world, const nlohmann::json& mine, double budget_mb,
                           const std::string& out_dir) {
  std::vector<nlohmann::json> ranks = gather_json(world, mine);
  Status written;
  if (world.rank() == 0) {
    bool equal = true;
    int64_t max_peak = 0;
    for (const auto& r : ranks) {
      equal = equal && r.at("equal").get<bool>();
      max_peak = std::max(max_peak, r.at("total").at("measured_peak").get<int64_t>());
    }
    const int64_t budget = static_cast<int64_t>(budget_mb * 1024 * 1024);
    nlohmann::json doc = {{"format_version", kLedgerFormatVersion},
                          {"equal", equal},
                          {"max_peak_bytes", max_peak},
                          {"budget_bytes", budget},
                          {"within_budget", budget == 0 || max_peak <= budget},
                          {"ranks", ranks}};
    written = write_file_atomic(RunPaths(out_dir).ledger(), doc.dump(1) + "\n");
  }
  return comm::agree(world, written);  // rank 0's error (naming the file and the reason) on every rank
}

}  // namespace sp::evidence
