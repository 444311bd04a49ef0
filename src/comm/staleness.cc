#include "comm/staleness.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace sp::comm {

int64_t stale_version(int64_t step, int worker, int staleness) {
  SP_CHECK(step >= 0 && worker >= 0 && staleness >= 0, "stale_version({}, {}, {})", step, worker, staleness);
  return std::max<int64_t>(0, step - (step + worker) % (int64_t{staleness} + 1));
}

bool refreshes_after(int64_t step, int worker, int staleness) {
  return stale_version(step + 1, worker, staleness) == step + 1;
}

void add_staleness(StalenessHistogram& h, int64_t step, const std::vector<int64_t>& versions) {
  for (int64_t v : versions) ++h[step - v];
}

nlohmann::json staleness_json(const StalenessHistogram& h) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [s, n] : h) j[std::to_string(s)] = n;
  return j;
}

}  // namespace sp::comm
