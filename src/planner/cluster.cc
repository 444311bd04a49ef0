#include "planner/cluster.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "comm/process_grid.h"
#include "config/toml_fields.h"
#include "core/file_io.h"
#include "planner/device_rates_toml.h"

namespace sp::planner {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;        // GB/s in the file: 1e9 bytes per second
constexpr double kGbit = 1e9 / 8;  // Gb/s in the file: 1e9 bits per second
constexpr double kUs = 1e-6;
constexpr double kTflops = 1e12;

const std::vector<std::string> kLinkKinds = {"nvlink", "nvswitch", "pcie", "shm"};
const std::vector<std::string> kNetworkKinds = {"infiniband", "roce", "ethernet"};

LinkKind link_kind_of(const std::string& s) {
  if (s == "nvlink") return LinkKind::kNvlink;
  if (s == "pcie") return LinkKind::kPcie;
  if (s == "shm") return LinkKind::kSharedMemory;
  return LinkKind::kNvswitch;
}
NetworkKind network_kind_of(const std::string& s) {
  if (s == "roce") return NetworkKind::kRoce;
  if (s == "ethernet") return NetworkKind::kEthernet;
  return NetworkKind::kInfiniband;
}

// Shortest text that reads back as the same double ("312", "0.0925", "1e-06").
std::string num(double v) { return fmt::format("{}", v); }

// A number the reader accepted (> 0 or ≥ 0) must also stay below the cluster's upper bound (cluster.h).
std::optional<double> at_most(config::TomlFields& f, const char* key, std::optional<double> v, double max) {
  if (v && *v > max) {
    f.error(fmt::format("{} = {} must be <= {} (docs/formats/cluster.md)", f.where(key), num(*v), num(max)));
    return std::nullopt;
  }
  return v;
}

}  // namespace

std::string link_kind_name(LinkKind kind) { return kLinkKinds[static_cast<size_t>(kind)]; }
std::string network_kind_name(NetworkKind kind) { return kNetworkKinds[static_cast<size_t>(kind)]; }

const std::vector<std::string>& known_dtypes() {
  static const std::vector<std::string> k = {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8"};
  return k;
}

Result<double> ClusterSpec::peak_flops_for(const std::string& dtype) const {
  auto it = peak_flops.find(dtype);
  if (it != peak_flops.end()) return it->second;
  std::string have;
  for (const auto& [k, v] : peak_flops) have += (have.empty() ? "" : ", ") + k;
  return invalid_argument("cluster '{}' gives no peak FLOP/s for dtype {}", name, dtype)
      .with_hint(fmt::format("it gives {}; add device.peak_tflops.{} to the cluster file or choose one of those", have,
                             dtype));
}

nlohmann::json ClusterSpec::to_json() const {
  nlohmann::json peaks = nlohmann::json::object();
  for (const auto& [k, v] : peak_flops) peaks[k] = v / kTflops;
  nlohmann::json j = {
      {"name", name},
      {"description", description},
      {"sources", sources},
      {"nodes", nodes},
      {"devices_per_node", devices_per_node},
      {"devices", devices()},
      {"device",
       {{"model", device_model},
        {"memory_gib", device_memory_bytes / kGiB},
        {"peak_tflops", peaks},
        {"measured", measured.empty() ? nlohmann::json(nullptr) : measured.to_json()}}},
      {"intra_node",
       {{"kind", link_kind_name(intra.kind)},
        {"bandwidth_gbytes_per_s", intra.bandwidth_bytes_per_s / kGB},
        {"latency_us", intra.latency_s / kUs}}},
      {"placement", {{"axis_order", axis_order}}},
  };
  if (!rank_nodes.empty()) {
    j["placement"]["rank_nodes"] = rank_nodes;
    j["placement"]["node_hosts"] = node_hosts;
  }
  if (inter)
    j["inter_node"] = {{"kind", network_kind_name(inter->kind)},
                       {"nics_per_node", inter->nics_per_node},
                       {"nic_gbits_per_s", inter->nic_bandwidth_bytes_per_s / kGbit},
                       {"latency_us", inter->latency_s / kUs},
                       {"node_gbytes_per_s", inter->node_bandwidth_bytes_per_s() / kGB}};
  return j;
}

Result<ClusterSpec> parse_cluster(const std::string& text, const std::string& origin) {
  SP_ASSIGN_OR_RETURN(toml::table root, config::parse_toml_text(text, origin));
  std::vector<std::string> errs;
  ClusterSpec c;
  config::TomlFields top(&root, "", origin, &errs);
  c.name = top.string("name").value_or("");
  c.description = top.string("description").value_or("");
  c.sources = top.strings("sources").value_or(std::vector<std::string>{});
  if (c.sources.empty() && root.get("sources"))
    top.error(fmt::format("{}: must list at least one source for the figures", top.where("sources")));

  config::TomlFields nodes(top.table("nodes"), "nodes", origin, &errs);
  c.nodes = static_cast<int>(nodes.integer("count", 1, 1 << 20).value_or(1));
  c.devices_per_node = static_cast<int>(nodes.integer("devices_per_node", 1, 1 << 16).value_or(1));
  if (int64_t{c.nodes} * c.devices_per_node > kMaxClusterDevices)
    nodes.error(fmt::format("{}: count {} × devices_per_node {} = {} devices must be <= {}", nodes.where("count"),
                            c.nodes, c.devices_per_node, int64_t{c.nodes} * c.devices_per_node, kMaxClusterDevices));
  nodes.finish();

  config::TomlFields device(top.table("device"), "device", origin, &errs);
  c.device_model = device.string("model").value_or("");
  c.device_memory_bytes =
      at_most(device, "memory_gib", device.number("memory_gib", config::NumberRule::kPositive), kMaxMemoryGib)
          .value_or(0) *
      kGiB;
  const toml::table* peak_table = device.table("peak_tflops");
  config::TomlFields peaks(peak_table, "device.peak_tflops", origin, &errs);
  const std::vector<std::string> dtypes = peaks.keys();
  for (const std::string& k : dtypes) {
    if (std::find(known_dtypes().begin(), known_dtypes().end(), k) == known_dtypes().end()) {
      std::string list;
      for (const auto& d : known_dtypes()) list += (list.empty() ? "" : ", ") + d;
      peaks.error(fmt::format("{}: unknown dtype (known: {})", peaks.where(k.c_str()), list));
      continue;
    }
    if (auto v = at_most(peaks, k.c_str(), peaks.number(k.c_str(), config::NumberRule::kPositive), kMaxPeakTflops))
      c.peak_flops[k] = *v * kTflops;
  }
  if (peak_table && dtypes.empty())
    peaks.error(fmt::format("{}: gives no dtype (rule: at least one of fp32, bf16, ...)", device.where("peak_tflops")));
  read_device_rates(device, origin, &errs, c.measured);
  for (const auto& [dtype, curve] : c.measured.gemm_efficiency)
    if (!c.peak_flops.count(dtype))
      device.error(fmt::format("{}: device.measured.gemm_efficiency.{} without device.peak_tflops.{}",
                               device.where("measured"), dtype, dtype));
  for (const auto& [dtype, forms] : c.measured.gemm_form_efficiency)
    if (!c.peak_flops.count(dtype))
      device.error(fmt::format("{}: device.measured.gemm_{}_efficiency.{} without device.peak_tflops.{}",
                               device.where("measured"), gemm_form_name(forms.begin()->first), dtype, dtype));
  device.finish();

  config::TomlFields intra(top.table("intra_node"), "intra_node", origin, &errs);
  c.intra.kind = link_kind_of(intra.choice("kind", kLinkKinds).value_or("nvswitch"));
  c.intra.bandwidth_bytes_per_s =
      at_most(intra, "bandwidth_gbytes_per_s", intra.number("bandwidth_gbytes_per_s", config::NumberRule::kPositive),
              kMaxGbytesPerS)
          .value_or(0) *
      kGB;
  c.intra.latency_s =
      at_most(intra, "latency_us", intra.number("latency_us", config::NumberRule::kNonNegative), kMaxLatencyUs)
          .value_or(0) *
      kUs;
  intra.finish();

  const toml::table* inter_table = top.table("inter_node", false);
  if (inter_table) {
    config::TomlFields inter(inter_table, "inter_node", origin, &errs);
    InterNodeNetwork n;
    n.kind = network_kind_of(inter.choice("kind", kNetworkKinds).value_or("infiniband"));
    n.nics_per_node = static_cast<int>(inter.integer("nics_per_node", 1, 1024).value_or(1));
    n.nic_bandwidth_bytes_per_s =
        at_most(inter, "nic_gbits_per_s", inter.number("nic_gbits_per_s", config::NumberRule::kPositive),
                8 * kMaxGbytesPerS)
            .value_or(0) *
        kGbit;
    n.latency_s =
        at_most(inter, "latency_us", inter.number("latency_us", config::NumberRule::kNonNegative), kMaxLatencyUs)
            .value_or(0) *
        kUs;
    inter.finish();
    c.inter = n;
  } else if (c.nodes > 1) {
    top.error(fmt::format("{}: missing table [inter_node] (rule: required when nodes.count = {} > 1)",
                          top.where("inter_node"), c.nodes));
  }

  config::TomlFields placement(top.table("placement"), "placement", origin, &errs);
  if (auto order = placement.string("axis_order")) {
    if (comm::parse_axis_order(*order).ok())
      c.axis_order = *order;
    else
      placement.error(fmt::format("{} = \"{}\" must order the axes tp, dp, pp, fastest first, like \"tp-dp-pp\"",
                                  placement.where("axis_order"), *order));
  }
  placement.finish();
  top.finish();
  SP_RETURN_IF_ERROR(config::fields_status(fmt::format("invalid cluster description {}", origin), errs,
                                           "the format, every field and its rule: docs/formats/cluster.md"));
  return c;
}

Result<ClusterSpec> read_cluster_file(const std::string& path) {
  if (!std::filesystem::exists(path))
    return invalid_argument("cluster file '{}' does not exist", path)
        .with_hint("give a preset name (configs/clusters/NAME.toml) or the path of a cluster file");
  SP_ASSIGN_OR_RETURN(std::string text, read_file(path, uint64_t{1} << 24));
  return parse_cluster(text, path);
}

std::string clusters_dir(const std::string& root) { return root + "/configs/clusters"; }

std::vector<std::string> cluster_preset_names(const std::string& presets_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(presets_dir, ec))
    if (e.path().extension() == ".toml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

Result<ClusterSpec> load_cluster(const std::string& presets_dir, const std::string& name_or_path) {
  const bool is_path =
      name_or_path.find('/') != std::string::npos || (name_or_path.size() > 5 && name_or_path.ends_with(".toml"));
  if (is_path) return read_cluster_file(name_or_path);
  const std::string path = presets_dir + "/" + name_or_path + ".toml";
  if (!std::filesystem::exists(path)) {
    std::string names;
    for (const auto& n : cluster_preset_names(presets_dir)) names += (names.empty() ? "" : ", ") + n;
    std::string hint = names.empty() ? "no presets found in " + presets_dir : "presets: " + names;
    if (name_or_path == "this-host") hint = "run `shardproof plan calibrate` first to measure this machine; " + hint;
    return invalid_argument("no cluster preset named '{}' in {}", name_or_path, presets_dir).with_hint(hint);
  }
  return read_cluster_file(path);
}

std::string cluster_to_toml(const ClusterSpec& s, const std::vector<std::string>& comment) {
  std::string t;
  for (const auto& line : comment) t += "# " + line + "\n";
  if (!comment.empty()) t += "\n";
  t += fmt::format("name = \"{}\"\ndescription = \"{}\"\nsources = [\n", s.name, s.description);
  for (const auto& src : s.sources) t += fmt::format("  \"{}\",\n", src);
  t += "]\n\n";
  t += fmt::format("[nodes]\ncount = {}\ndevices_per_node = {}\n\n", s.nodes, s.devices_per_node);
  t += fmt::format("[device]\nmodel = \"{}\"\nmemory_gib = {}\n\n[device.peak_tflops]\n", s.device_model,
                   num(s.device_memory_bytes / kGiB));
  for (const auto& [k, v] : s.peak_flops) t += fmt::format("{} = {}\n", k, num(v / kTflops));
  t += device_rates_to_toml(s.measured);
  t +=
      fmt::format("\n[intra_node]\nkind = \"{}\"\nbandwidth_gbytes_per_s = {}\nlatency_us = {}\n",
                  link_kind_name(s.intra.kind), num(s.intra.bandwidth_bytes_per_s / kGB), num(s.intra.latency_s / kUs));
  if (s.inter)
    t += fmt::format("\n[inter_node]\nkind = \"{}\"\nnics_per_node = {}\nnic_gbits_per_s = {}\nlatency_us = {}\n",
                     network_kind_name(s.inter->kind), s.inter->nics_per_node,
                     num(s.inter->nic_bandwidth_bytes_per_s / kGbit), num(s.inter->latency_s / kUs));
  t += fmt::format("\n[placement]\naxis_order = \"{}\"\n", s.axis_order);
  return t;
}

Result<ClusterSpec> with_nodes(const ClusterSpec& spec, int64_t nodes) {
  const int64_t max_nodes = kMaxClusterDevices / spec.devices_per_node;
  if (nodes < 1 || nodes > max_nodes)
    return invalid_argument(
               "--nodes {} must be in [1, {}]: cluster '{}' has {} devices per node, and a plan covers at "
               "most {} devices",
               nodes, max_nodes, spec.name, spec.devices_per_node, kMaxClusterDevices)
        .with_hint(fmt::format("give --nodes between 1 and {}", max_nodes));
  if (nodes > 1 && !spec.inter)
    return invalid_argument("cluster '{}' has no [inter_node] network, so it cannot have {} nodes", spec.name, nodes)
        .with_hint("add an [inter_node] table to the cluster file (docs/formats/cluster.md) or use --nodes 1");
  ClusterSpec c = spec;
  c.nodes = static_cast<int>(nodes);
  return c;
}

Result<ClusterSpec> with_rank_hosts(const ClusterSpec& spec, const std::vector<std::string>& host_of_rank) {
  ClusterSpec c = spec;
  c.rank_nodes.clear();
  c.node_hosts.clear();
  std::vector<int> ranks_on;
  for (const std::string& h : host_of_rank) {
    const auto it = std::find(c.node_hosts.begin(), c.node_hosts.end(), h);
    const int node = static_cast<int>(it - c.node_hosts.begin());
    if (it == c.node_hosts.end()) {
      c.node_hosts.push_back(h);
      ranks_on.push_back(0);
    }
    c.rank_nodes.push_back(node);
    ++ranks_on[static_cast<size_t>(node)];
  }
  const int most = ranks_on.empty() ? 0 : *std::max_element(ranks_on.begin(), ranks_on.end());
  if (static_cast<int>(c.node_hosts.size()) > spec.nodes || most > spec.devices_per_node)
    return invalid_argument(
               "the run placed {} ranks on {} hosts ({}), at most {} on one host; cluster '{}' has {} nodes of {} "
               "devices",
               host_of_rank.size(), c.node_hosts.size(), fmt::join(c.node_hosts, ", "), most, spec.name, spec.nodes,
               spec.devices_per_node)
        .with_hint(
            fmt::format("plan it on a cluster of at least {} nodes of {} devices: `shardproof plan calibrate` across "
                        "the same hosts writes one (docs/cluster.md), or --nodes {} for a preset",
                        c.node_hosts.size(), most, c.node_hosts.size()));
  if (c.node_hosts.size() > 1 && !spec.inter)
    return invalid_argument("the run spans {} hosts, but cluster '{}' has no [inter_node] network", c.node_hosts.size(),
                            spec.name)
        .with_hint("plan it on a cluster file calibrated across those hosts (docs/cluster.md)");
  return c;
}

}  // namespace sp::planner
