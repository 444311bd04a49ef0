// The text form of plan documents (plan_text.h).
#include "cli/plan_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "planner/search.h"

namespace sp::cli {

std::string cluster_line(const planner::ClusterSpec& c) {
  std::string peaks;
  for (const auto& [k, v] : c.peak_flops) peaks += fmt::format("{}{} {:.4g}", peaks.empty() ? "" : ", ", k, v / 1e12);
  std::string line = fmt::format(
      "cluster {}: {} node{} × {} {} ({:.4g} GiB; peak TFLOP/s: {}); intra-node {} {:.4g} GB/s per direction, "
      "{:.3g} us",
      c.name, c.nodes, c.nodes == 1 ? "" : "s", c.devices_per_node, c.device_model,
      c.device_memory_bytes / 1073741824.0, peaks, planner::link_kind_name(c.intra.kind),
      c.intra.bandwidth_bytes_per_s / 1e9, c.intra.latency_s * 1e6);
  if (c.inter)
    line += fmt::format("; inter-node {} {} × {:.4g} Gb/s, {:.3g} us", planner::network_kind_name(c.inter->kind),
                        c.inter->nics_per_node, c.inter->nic_bandwidth_bytes_per_s * 8 / 1e9, c.inter->latency_s * 1e6);
  return line + fmt::format("; axis order {}", c.axis_order);
}

void print_evaluation(const nlohmann::json& j) {
  const auto& m = j["memory"];
  const auto& st = j["step"];
  const auto& pl = j["pipeline"];
  std::printf("placement %s\n", j["placement"]["grid"].get<std::string>().c_str());
  const auto& where = j["inputs"]["cluster"]["placement"];
  if (where.contains("node_hosts")) {  // a run across hosts, priced where it ran (topology.json)
    std::string nodes;
    for (size_t n = 0; n < where["node_hosts"].size(); ++n) {
      std::string ranks;
      for (size_t r = 0; r < where["rank_nodes"].size(); ++r)
        if (where["rank_nodes"][r].get<size_t>() == n) ranks += fmt::format("{}{}", ranks.empty() ? "" : ",", r);
      nodes +=
          fmt::format("{}node {} = {} (ranks {})", n ? "; " : "", n, where["node_hosts"][n].get<std::string>(), ranks);
    }
    std::printf("  ranks on the run's recorded hosts: %s\n", nodes.c_str());
  }
  for (const auto& w : j["placement"].value("warnings", nlohmann::json::array()))
    std::printf("  WARNING: %s\n", w.get<std::string>().c_str());
  for (const auto& [axis, l] : j["placement"]["links"].items())
    std::printf("  %-5s group %4d  %-26s %10.4g GB/s per hop %8.3g us\n", axis.c_str(), l["group_size"].get<int>(),
                l["link"].get<std::string>().c_str(), l["bandwidth_gbytes_per_s"].get<double>(),
                l["latency_us"].get<double>());
  std::printf(
      "memory per rank (ledger model, peak bytes by category; device limit %.2f GiB): %s\n",
      m["limit_bytes"].get<double>() / 1073741824.0,
      m["fits"].get<bool>()
          ? "fits"
          : fmt::format("DOES NOT FIT ({} is the largest category)", m["largest_category"].get<std::string>()).c_str());
  std::printf("  %-16s %12s %12s %12s %12s %12s %12s %12s %12s\n", "rank", "peak", "param", "grad", "optim",
              "activation", "comm", "workspace", "io");
  for (const auto& r : m["ranks"]) {
    const auto& c = r["by_category"];
    std::printf("  %-16s", fmt::format("{} {}", r["rank"].get<int>(), r["coords"].get<std::string>()).c_str());
    for (const char* k : {"", "param", "grad", "optim", "activation", "comm", "workspace", "io"})
      std::printf(" %12.1f", (*k ? c[k].get<double>() : r["peak_bytes"].get<double>()) / 1048576.0);
    std::printf("  MiB\n");
  }
  std::printf("traffic per step, busiest evaluated rank (traffic model, priced with the alpha-beta model):\n");
  std::printf("  %-6s %-10s %-15s %8s %14s %12s  %s\n", "axis", "phase", "op", "ops", "bytes", "seconds", "link");
  for (const auto& t : j["traffic"])
    std::printf("  %-6s %-10s %-15s %8lld %14lld %12.4g  %s\n", t["axis"].get<std::string>().c_str(),
                t["phase"].get<std::string>().c_str(), t["op"].get<std::string>().c_str(),
                static_cast<long long>(t["ops"].get<int64_t>()), static_cast<long long>(t["bytes"].get<int64_t>()),
                t["seconds"].get<double>(), t["link"].get<std::string>().c_str());
  std::printf("pipeline (%s): simulated %.4g s, bubble %.1f %% (closed form %.1f %%)\n",
              pl["schedule"].get<std::string>().c_str(), pl["simulated_seconds"].get<double>(),
              100 * pl["bubble_fraction"].get<double>(), 100 * pl["closed_form_bubble_fraction"].get<double>());
  const auto& cp = j["compute"];
  const std::string split =
      cp.value("measured_rates", false)
          ? fmt::format(
                "compute {:.4g} s = GEMMs {:.4g} + attention {:.4g} + memory-bound {:.4g}; optimizer {:.4g} s; "
                "evidence {:.4g} s",
                st["compute_seconds"].get<double>(), cp["gemm_seconds"].get<double>(),
                cp["attention_seconds"].get<double>(), cp["memory_seconds"].get<double>(),
                st.value("optimizer_seconds", 0.0), st.value("evidence_seconds", 0.0))
          : fmt::format("GEMMs {:.4g} s", st["compute_seconds"].get<double>());
  std::printf(
      "step %.4g s (%s, collectives inside the passes %.4g s, after the pipeline %.4g s); %.0f tokens/s; "
      "MFU %.1f %%, HFU %.1f %%; dominant communication: %s\n",
      st["seconds"].get<double>(), split.c_str(), st["pass_comm_seconds"].get<double>(),
      st["after_pipeline_seconds"].get<double>(), st["tokens_per_second"].get<double>(), 100 * st["mfu"].get<double>(),
      100 * st["hfu"].get<double>(), st["dominant_comm"].get<std::string>().c_str());
  std::printf("assumptions:\n");
  for (const auto& s : j["assumptions"]) std::printf("  - %s\n", s.get<std::string>().c_str());
}

void print_search(const nlohmann::json& j) {
  std::printf("%lld strategies enumerated: %zu ranked, %zu excluded\n",
              static_cast<long long>(j["enumerated"].get<int64_t>()), j["ranked"].size(), j["excluded"].size());
  // The best 20; the strategy column as wide as its longest name, step times to 4 significant digits.
  int width = 8;
  for (const auto& r : j["ranked"])
    if (r["rank"].get<int>() <= 20)
      width = std::max(width, static_cast<int>(r["strategy"]["name"].get<std::string>().size()));
  std::printf("  %4s  %-*s %10s %12s %7s %10s  %s\n", "rank", width, "strategy", "step s", "tokens/s", "MFU",
              "peak GiB", "dominant communication");
  for (const auto& r : j["ranked"]) {
    if (r["rank"].get<int>() > 20) break;
    const auto& d = r["time"]["detail"];
    std::printf("  %4d  %-*s %#10.4g %12.0f %6.1f%% %10.3f  %s\n", r["rank"].get<int>(), width,
                r["strategy"]["name"].get<std::string>().c_str(), r["time"]["step_seconds"].get<double>(),
                d["tokens_per_second"].get<double>(), 100 * d["mfu"].get<double>(),
                r["memory"]["peak_bytes"].get<double>() / 1073741824.0, d["dominant"].get<std::string>().c_str());
  }
  std::printf("excluded by kind:");
  for (const auto& [k, n] : j["excluded_by_kind"].items())
    std::printf(" %s %lld", k.c_str(), static_cast<long long>(n.get<int64_t>()));
  std::printf("\n");
  // Per rule: strategies (a strategy breaking rules of one kind with different wordings counts under each).
  for (const auto& r : planner::excluded_by_rule(j["excluded"]))
    std::printf("  %6lld × %s: %s...\n         e.g. %s\n", static_cast<long long>(r["count"].get<int64_t>()),
                r["kind"].get<std::string>().c_str(), r["rule"].get<std::string>().c_str(),
                r["example"].get<std::string>().c_str());
}

}  // namespace sp::cli
