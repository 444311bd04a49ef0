// `shardproof plan`: the cluster planner's command line (docs/plan.md).
//   plan --cluster C --model M [--nodes N] [--dp D --tp T --pp P] [--json]
//       loads and checks the cluster description and the model, places the strategy's rank grid on the
//       cluster and prints which link each axis crosses with its α–β numbers. The memory / bytes / bubble /
//       step-time report and --search are issue 15 phase 2 (their JSON schema is in docs/plan.md).
//   plan calibrate [--np N] [--out FILE] [--quick]   measures this machine into configs/clusters/this-host.toml
//   plan list                                      cluster presets and named model shapes
// Exit codes: 0 success, 2 usage or configuration error (a bad cluster or model file, an impossible
// placement), 1 runtime error.
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/command.h"
#include "cli/run_setup.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_scope.h"
#include "core/file_io.h"
#include "core/log.h"
#include "plan/calibrate.h"
#include "plan/cluster.h"
#include "plan/collective_time.h"
#include "plan/group_links.h"
#include "plan/hf_config.h"
#include "plan/model_shape.h"

namespace sp::cli {
namespace {

std::string clusters_dir(const std::string& root) { return root + "/configs/clusters"; }

// --model: a Hugging Face config.json, a run configuration (.toml), a named shape, or a preset in configs/.
Result<plan::ModelShape> resolve_model(const std::string& root, const std::string& spec) {
  if (spec.ends_with(".json")) return plan::read_hf_config(spec);
  if (spec.ends_with(".toml")) {
    SP_ASSIGN_OR_RETURN(plan::RunConfig rc, load_run_config(root, "", spec, {}));
    return plan::ModelShape::from_llama(rc.model, rc.name, spec);
  }
  auto named = plan::named_shape(spec);
  if (named.ok()) return named;
  if (std::filesystem::exists(root + "/configs/" + spec + ".toml")) {
    SP_ASSIGN_OR_RETURN(plan::RunConfig rc, load_run_config(root, spec, "", {}));
    return plan::ModelShape::from_llama(rc.model, spec, "configs/" + spec + ".toml [model], data.vocab_size");
  }
  return named.status().with_hint(named.status().hint() + " (presets: configs/*.toml)");
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string cluster_line(const plan::ClusterSpec& c) {
  std::string peaks;
  for (const auto& [k, v] : c.peak_flops) peaks += fmt::format("{}{} {:.4g}", peaks.empty() ? "" : ", ", k, v / 1e12);
  std::string line = fmt::format(
      "cluster {}: {} node{} × {} {} ({:.4g} GiB; peak TFLOP/s: {}); intra-node {} {:.4g} GB/s per direction, "
      "{:.3g} us",
      c.name, c.nodes, c.nodes == 1 ? "" : "s", c.devices_per_node, c.device_model,
      c.device_memory_bytes / 1073741824.0, peaks, plan::link_kind_name(c.intra.kind),
      c.intra.bandwidth_bytes_per_s / 1e9, c.intra.latency_s * 1e6);
  if (c.inter)
    line += fmt::format("; inter-node {} {} × {:.4g} Gb/s, {:.3g} us", plan::network_kind_name(c.inter->kind),
                        c.inter->nics_per_node, c.inter->nic_bandwidth_bytes_per_s * 8 / 1e9, c.inter->latency_s * 1e6);
  return line + fmt::format("; axis order {}", c.axis_order);
}

struct PlanArgs {
  std::string cluster, model, root;
  int nodes = 0, dp = 0, tp = 0, pp = 0;
  bool json = false;
};

int run_plan(const PlanArgs& a) {
  const std::string root = a.root.empty() ? default_root() : a.root;
  if (a.cluster.empty() || a.model.empty())
    return report_status(invalid_argument("plan needs --cluster and --model")
                             .with_hint("for example: shardproof plan --cluster dgx-a100 --nodes 16 --model llama-65b "
                                        "--dp 16 --tp 8 --pp 1; `shardproof plan list` names the presets"));
  auto cluster = plan::load_cluster(clusters_dir(root), a.cluster);
  if (!cluster.ok()) return report_status(cluster.status());
  if (a.nodes > 0) {
    cluster = plan::with_nodes(*cluster, a.nodes);
    if (!cluster.ok()) return report_status(cluster.status());
  }
  auto model = resolve_model(root, a.model);
  if (!model.ok()) return report_status(model.status());
  nlohmann::json out = {{"cluster", cluster->to_json()}, {"model", model->to_json()}};
  const bool strategy = a.dp > 0 || a.tp > 0 || a.pp > 0;
  std::vector<std::pair<std::string, plan::GroupLink>> links;
  if (strategy) {
    const int dp = std::max(a.dp, 1), tp = std::max(a.tp, 1), pp = std::max(a.pp, 1);
    auto grid = plan::place_on_cluster(*cluster, dp, tp, pp);
    if (!grid.ok()) return report_status(grid.status());
    links = {{"tp", plan::axis_link(*cluster, *grid, comm::Axis::kTp, plan::HopPattern::kRing)},
             {"dp", plan::axis_link(*cluster, *grid, comm::Axis::kDp, plan::HopPattern::kRing)},
             {"pp", plan::axis_link(*cluster, *grid, comm::Axis::kPp, plan::HopPattern::kChain)}};
    out["strategy"] = {{"dp", dp}, {"tp", tp}, {"pp", pp}, {"grid", grid->describe()}};
    for (const auto& [axis, l] : links) out["links"][axis] = l.to_json();
    out["assumptions"] = plan::time_model_assumptions();
  }
  out["phase"] = "cluster, model and placement; memory, bytes, bubble and step time come with issue 15 phase 2";
  if (a.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%s\n", cluster_line(*cluster).c_str());
  const auto& m = *model;
  std::printf(
      "model %s (%s): %.4g billion parameters; L %lld, C %lld, H %lld, KV %lld, F %lld, V %lld, max_seq %lld\n"
      "  source: %s\n",
      m.name.c_str(), plan::model_family_name(m.family).c_str(), static_cast<double>(m.param_count()) / 1e9,
      static_cast<long long>(m.n_layers), static_cast<long long>(m.dim), static_cast<long long>(m.n_heads),
      static_cast<long long>(m.n_kv_heads), static_cast<long long>(m.ffn_dim), static_cast<long long>(m.vocab_size),
      static_cast<long long>(m.max_seq), m.source.c_str());
  if (strategy) {
    std::printf("placement %s\n", out["strategy"]["grid"].get<std::string>().c_str());
    std::printf("  %-4s %6s  %-24s %12s %9s %6s %11s\n", "axis", "group", "link (worst group)", "GB/s per hop",
                "us/hop", "nodes", "flows/node");
    for (const auto& [axis, l] : links)
      std::printf("  %-4s %6d  %-24s %12.4g %9.3g %6d %11d\n", axis.c_str(), l.group_size, l.link.c_str(),
                  l.bandwidth_bytes_per_s / 1e9, l.latency_s * 1e6, l.nodes_spanned, l.flows_per_node);
    for (const auto& [axis, l] : links)
      if (l.group_size > 1) std::printf("  %s: %s\n", axis.c_str(), l.description.c_str());
    std::printf("assumptions:\n");
    for (const auto& s : plan::time_model_assumptions()) std::printf("  - %s\n", s.c_str());
  }
  std::printf("%s\n", out["phase"].get<std::string>().c_str());
  return 0;
}

int run_list(const std::string& root_arg) {
  const std::string root = root_arg.empty() ? default_root() : root_arg;
  std::printf("cluster presets (%s):\n", clusters_dir(root).c_str());
  for (const auto& name : plan::cluster_preset_names(clusters_dir(root))) {
    auto c = plan::load_cluster(clusters_dir(root), name);
    std::printf("  %-14s %s\n", name.c_str(), c.ok() ? c->description.c_str() : c.status().message().c_str());
  }
  std::printf("named model shapes:\n");
  for (const auto& n : plan::named_shapes())
    std::printf("  %-16s %9.4g B parameters (published %.*f B)  %s\n", n.shape.name.c_str(),
                static_cast<double>(n.shape.param_count()) / 1e9, n.published_decimals, n.published_billions,
                n.shape.source.c_str());
  std::printf("also: a preset name (configs/*.toml), a run config FILE.toml, or a Hugging Face config.json\n");
  return 0;
}

struct CalibrateArgs {
  int np = 0;
  std::string out, root;
  bool quick = false;
};

int run_calibrate(const CalibrateArgs& a, CLI::App* cmd) {
  if (!launched_by_mpi()) {
    const int np = a.np > 0 ? a.np : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
    std::vector<std::string> args = {"plan", "calibrate"};
    for (const auto& opt : cmd->get_options()) {
      if (opt->get_name() == "--np" || opt->get_name() == "--help" || opt->count() == 0) continue;
      for (const auto& v : opt->results()) {
        args.push_back(opt->get_name());
        if (opt->get_expected_min() > 0) args.push_back(v);
      }
    }
    return relaunch_with_mpirun(np, args);
  }
  const std::string root = a.root.empty() ? default_root() : a.root;
  const std::string out = a.out.empty() ? clusters_dir(root) + "/this-host.toml" : a.out;
  comm::MpiScope mpi(nullptr, nullptr);
  auto world = comm::make_world_communicator();
  plan::CalibrationOptions o;
  if (a.quick) {
    o.gemm_n = 256;
    o.gemm_seconds = 0.05;
    o.repetitions = 5;
  }
  auto c = plan::calibrate_this_host(*world, mpi.hostname(), o);
  if (!c.ok()) return report_status(c.status(), /*all_ranks=*/false);
  if (mpi.world_rank() != 0) return 0;
  const std::string when = utc_now();
  const plan::ClusterSpec spec = plan::this_host_cluster(*c, when);
  const std::string text = plan::cluster_to_toml(spec, plan::calibration_comment(*c, when));
  auto check = plan::parse_cluster(text, out);  // what is written must read back
  if (!check.ok()) return report_status(check.status().with_context("calibrate produced an unreadable cluster file"));
  const std::string dir = std::filesystem::path(out).parent_path().string();
  if (!dir.empty()) {
    Status made = make_directories(dir);
    if (!made.ok()) return report_status(made);
  }
  Status w = write_file_atomic(out, text);
  if (!w.ok()) return report_status(w);
  std::printf("%s\n", cluster_line(spec).c_str());
  if (c->load_average > c->cores)
    log_warn(
        "the machine was busy (load average {:.1f} on {} CPUs): the figures are pessimistic; calibrate again on "
        "a quiet machine",
        c->load_average, c->cores);
  std::printf("written: %s\n", out.c_str());
  return 0;
}

}  // namespace

void register_plan(CLI::App& app, CommandResult& result) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand("plan", "Price a parallel strategy on a described cluster (docs/plan.md)");
  cmd->require_subcommand(0, 1);
  cmd->add_option("--cluster", a->cluster, "Cluster preset (configs/clusters/NAME.toml) or cluster file");
  cmd->add_option("--model", a->model,
                  "Named shape (plan list), preset (configs/NAME.toml), run config FILE.toml or HF config.json");
  cmd->add_option("--nodes", a->nodes, "Number of nodes (overrides the cluster file's nodes.count)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--dp", a->dp, "Data-parallel degree")->check(CLI::PositiveNumber);
  cmd->add_option("--tp", a->tp, "Tensor-parallel degree")->check(CLI::PositiveNumber);
  cmd->add_option("--pp", a->pp, "Pipeline-parallel degree")->check(CLI::PositiveNumber);
  cmd->add_option("--root", a->root, "Repository root for configs/ (default: the source tree)");
  cmd->add_flag("--json", a->json, "Print JSON instead of text");

  auto c = std::make_shared<CalibrateArgs>();
  CLI::App* cal =
      cmd->add_subcommand("calibrate", "Measure sgemm FLOP/s per core and MPI latency/bandwidth into a cluster file");
  cal->add_option("--np", c->np, "Ranks to measure with (default: the number of cores, at least 2)")
      ->check(CLI::PositiveNumber);
  cal->add_option("--out", c->out, "Cluster file to write (default: <root>/configs/clusters/this-host.toml)");
  cal->add_option("--root", c->root, "Repository root (default: the source tree)");
  cal->add_flag("--quick", c->quick, "Small sgemm and few repetitions (tests); noisier figures");
  cal->callback([c, cal, &result] { result.exit_code = run_calibrate(*c, cal); });

  auto list_root = std::make_shared<std::string>();
  CLI::App* list = cmd->add_subcommand("list", "List cluster presets and named model shapes");
  list->add_option("--root", *list_root, "Repository root (default: the source tree)");
  list->callback([list_root, &result] { result.exit_code = run_list(*list_root); });

  cmd->callback([a, cmd, &result] {
    if (!cmd->get_subcommands().empty()) return;  // calibrate or list ran
    result.exit_code = run_plan(*a);
  });
}

}  // namespace sp::cli
