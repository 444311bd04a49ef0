#include "parallel/memory_fit.h"

#include <fmt/format.h>

#include <vector>

#include "comm/agree.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/machine.h"

namespace sp::parallel {
namespace {

std::string gib(int64_t bytes) { return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1 << 30)); }

}  // namespace

Status check_memory_fit(const plan::RunPlan& plan, const comm::ProcessGrid& grid, comm::Communicator& world) {
  const int n = world.size(), rank = world.rank();
  const int64_t peak =
      plan::predict_ledger(plan::rank_ledger_input(plan, grid, rank, plan.config.train.eval_batches)).total.peak;
  const std::string host = host_name();
  const int64_t mine[2] = {static_cast<int64_t>(xxh3_64(host)), peak};
  std::vector<int64_t> all(2 * static_cast<size_t>(n));
  world.all_gather(mine, all.data(), std::vector<int64_t>(static_cast<size_t>(n), 2), DType::kI64);
  int64_t sum = 0;
  std::vector<int> on_host;
  for (int r = 0; r < n; ++r)
    if (all[2 * static_cast<size_t>(r)] == mine[0]) {
      sum += all[2 * static_cast<size_t>(r) + 1];
      on_host.push_back(r);
    }
  Status st;
  const Result<int64_t> available = available_memory_bytes();
  if (!available.ok()) {
    if (on_host.front() == rank)
      log_warn("cannot check the predicted memory against host '{}': {}", host, available.status().message());
  } else if (sum > *available) {
    st = invalid_argument(
             "the model does not fit in memory: the memory ledger predicts a peak of {} ({} bytes) for the {} on host "
             "'{}' (world rank{} {}), but only {} ({} bytes) are available there (MemAvailable, /proc/meminfo)",
             gib(sum), sum, on_host.size() == 1 ? "rank" : fmt::format("{} ranks", on_host.size()), host,
             on_host.size() == 1 ? "" : "s", fmt::join(on_host, ", "), gib(*available), *available)
             .with_hint(
                 "a smaller model, micro-batch or seq_len, train.recompute = \"full\", more ranks per model "
                 "(parallel.zero = 3, tp or pp), or more hosts");
  }
  return comm::agree(world, st);
}

}  // namespace sp::parallel
