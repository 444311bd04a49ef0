// ClusterSpec: the hardware a plan is priced on — nodes of identical devices, the link inside a node,
// the network between nodes, and how the rank grid is laid onto devices. It is a description read
// from TOML (docs/formats/cluster.md), not a measurement (planner/calibrate.h writes this-host's).
// Invariant: a ClusterSpec that exists passed every rule (counts ≥ 1, sizes and bandwidths > 0,
// latencies ≥ 0, an inter-node network whenever nodes > 1, a valid axis order); rank r runs on
// device r mod devices_per_node of node ⌊r / devices_per_node⌋ (mpirun's default by-slot mapping), unless a
// run's recorded hosts place it (with_rank_hosts: `plan --run` of a run across hosts).
// Units inside the struct are SI (bytes, bytes/s, seconds, FLOP/s); the file uses GiB, GB/s, Gb/s, µs, TFLOP/s.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "planner/device_rates.h"

namespace sp::planner {

enum class LinkKind { kNvlink, kNvswitch, kPcie, kSharedMemory };
enum class NetworkKind { kInfiniband, kRoce, kEthernet };
std::string link_kind_name(LinkKind kind);        // "nvlink", "nvswitch", "pcie", "shm"
std::string network_kind_name(NetworkKind kind);  // "infiniband", "roce", "ethernet"

struct IntraNodeLink {
  LinkKind kind = LinkKind::kNvswitch;
  double bandwidth_bytes_per_s = 0;  // per device, per direction
  double latency_s = 0;              // per hop (one step of a ring)
};

struct InterNodeNetwork {
  NetworkKind kind = NetworkKind::kInfiniband;
  int nics_per_node = 0;
  double nic_bandwidth_bytes_per_s = 0;  // per NIC, per direction
  double latency_s = 0;                  // per hop between nodes
  double node_bandwidth_bytes_per_s() const { return nics_per_node * nic_bandwidth_bytes_per_s; }
};

struct ClusterSpec {
  std::string name;
  std::string description;
  std::vector<std::string> sources;  // where every figure comes from (datasheets, measurements)
  int nodes = 1;
  int devices_per_node = 1;
  std::string device_model;
  double device_memory_bytes = 0;
  std::map<std::string, double> peak_flops;  // dtype ("fp32", "bf16", ...) → dense FLOP/s per device
  DeviceRates measured;                      // [device.measured]: empty for a datasheet preset
  IntraNodeLink intra;
  std::optional<InterNodeNetwork> inter;  // present whenever nodes > 1
  std::string axis_order = "tp-dp-pp";    // the grid's order, fastest axis first (comm/process_grid.h)
  // Not in the file: the node of each world rank where a run recorded it (with_rank_hosts) and the host each
  // node was; empty: by slot.
  std::vector<int> rank_nodes;
  std::vector<std::string> node_hosts;

  int devices() const { return nodes * devices_per_node; }
  int node_of(int rank) const {
    return static_cast<size_t>(rank) < rank_nodes.size() ? rank_nodes[static_cast<size_t>(rank)]
                                                         : rank / devices_per_node;
  }
  // Peak FLOP/s for `dtype`; kInvalidArgument naming the dtypes the file gives when it has none.
  Result<double> peak_flops_for(const std::string& dtype) const;
  nlohmann::json to_json() const;
};

// The dtype names a cluster file may give peaks for.
const std::vector<std::string>& known_dtypes();

// Upper bounds of a cluster's figures (docs/formats/cluster.md): far beyond any machine, small enough that
// every derived quantity (devices as an int, bytes as an int64) is exact. A file or --nodes beyond them is
// refused by name rather than overflowing into a negative device memory.
inline constexpr int64_t kMaxClusterDevices = int64_t{1} << 20;  // nodes × devices_per_node
inline constexpr double kMaxMemoryGib = 1 << 20;                 // 1 PiB per device
inline constexpr double kMaxPeakTflops = 1e6;                    // 1 EFLOP/s per device
inline constexpr double kMaxGbytesPerS = 1e6;                    // 1 PB/s per link or device
inline constexpr double kMaxLatencyUs = 1e6;                     // 1 s per hop

// Strict: every problem of the file in one kInvalidArgument message, each naming file:line, the
// field and the rule (docs/formats/cluster.md).
Result<ClusterSpec> parse_cluster(const std::string& text, const std::string& origin);
Result<ClusterSpec> read_cluster_file(const std::string& path);
// `name_or_path`: a path (contains '/' or ends in .toml) or a preset NAME in `presets_dir`
// (NAME.toml); an unknown name lists the presets.
Result<ClusterSpec> load_cluster(const std::string& presets_dir, const std::string& name_or_path);
// `root`/configs/clusters: where a source tree's cluster presets live.
std::string clusters_dir(const std::string& root);
// The preset names in `presets_dir`, sorted.
std::vector<std::string> cluster_preset_names(const std::string& presets_dir);
// The TOML text of `spec` in the file format (parse_cluster(cluster_to_toml(s)) == s up to rounding
// of the printed numbers); `comment` lines are written first, each prefixed with "# ".
std::string cluster_to_toml(const ClusterSpec& spec, const std::vector<std::string>& comment = {});
// The same cluster with `nodes` nodes (the CLI's --nodes); kInvalidArgument if nodes > 1 and the
// file has no [inter_node], or if nodes is outside [1, kMaxClusterDevices / devices_per_node].
Result<ClusterSpec> with_nodes(const ClusterSpec& spec, int64_t nodes);
// The same cluster with world rank r on the node of `host_of_rank[r]` (a run's topology.json hosts, in rank
// order; nodes numbered by each host's first rank), as mpirun placed them. kInvalidArgument naming both sides
// when the run used more hosts than the cluster has nodes or put more ranks on one host than a node has devices.
Result<ClusterSpec> with_rank_hosts(const ClusterSpec& spec, const std::vector<std::string>& host_of_rank);

}  // namespace sp::planner
