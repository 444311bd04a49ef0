#include "planner/calibrate_hosts.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace sp::planner {
namespace {

constexpr size_t kHostBytes = 256;  // a host name and its terminating zero (HOST_NAME_MAX is 64 on Linux)

std::string listing(const std::vector<std::string>& host_of_rank) {
  std::string out;
  for (size_t r = 0; r < host_of_rank.size(); ++r)
    out += fmt::format("{}rank {} on {}", r ? ", " : "", r, host_of_rank[r]);
  return out;
}

}  // namespace

Result<RankHosts> gather_rank_hosts(comm::Communicator& world, const std::string& host) {
  const size_t n = static_cast<size_t>(world.size());
  std::vector<char> mine(kHostBytes, '\0'), all(kHostBytes * n, '\0');
  std::memcpy(mine.data(), host.data(), std::min(host.size(), kHostBytes - 1));
  world.all_gather(mine.data(), all.data(), std::vector<int64_t>(n, static_cast<int64_t>(kHostBytes)), DType::kU8);
  RankHosts out;
  for (size_t r = 0; r < n; ++r) {
    out.host_of_rank.emplace_back(all.data() + r * kHostBytes);
    if (std::find(out.hosts.begin(), out.hosts.end(), out.host_of_rank.back()) == out.hosts.end())
      out.hosts.push_back(out.host_of_rank.back());
  }
  out.ranks_per_host = static_cast<int>(n / out.hosts.size());
  bool by_slot = n % out.hosts.size() == 0;
  for (size_t r = 0; by_slot && r < n; ++r)
    by_slot = out.host_of_rank[r] == out.hosts[r / static_cast<size_t>(out.ranks_per_host)];
  if (!by_slot)
    return invalid_argument(
               "plan calibrate: the {} ranks are not placed by slot in equal blocks per host ({}); a cluster file "
               "describes nodes of equal size with rank r on node floor(r / devices_per_node)",
               n, listing(out.host_of_rank))
        .with_hint("give every host the same number of slots in the hostfile and keep mpirun's default --map-by slot");
  if (out.nodes() > 1 && out.ranks_per_host < 2)
    return invalid_argument("plan calibrate: one rank on each of {} hosts leaves no link inside a host to measure",
                            out.nodes())
        .with_hint(fmt::format("give each host 2 slots in the hostfile and run --np {}", 2 * out.nodes()));
  return out;
}

}  // namespace sp::planner
