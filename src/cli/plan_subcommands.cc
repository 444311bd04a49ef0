#include "cli/plan_subcommands.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/plan_text.h"
#include "cli/run_setup.h"
#include "comm/agree.h"
#include "comm/mpi_communicator.h"
#include "comm/mpi_scope.h"
#include "config/run_sources.h"
#include "core/file_io.h"
#include "core/log.h"
#include "kernels/gemm32_auto.h"
#include "planner/calibrate.h"
#include "planner/cluster.h"
#include "planner/collective_time.h"
#include "planner/evaluate.h"
#include "planner/kernel_costs.h"
#include "planner/model_shape.h"
#include "planner/published_prediction.h"
#include "planner/published_runs.h"

namespace sp::cli {

Result<planner::ClusterSpec> load_cluster_for(const std::string& root, const std::string& name_or_path) {
  const std::string user = user_clusters_dir(root);
  if (user != planner::clusters_dir(root) && std::filesystem::exists(user + "/" + name_or_path + ".toml"))
    return planner::load_cluster(user, name_or_path);
  return planner::load_cluster(planner::clusters_dir(root), name_or_path);
}

namespace {

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int run_list(const std::string& root_arg) {
  const std::string root = root_arg.empty() ? default_root() : root_arg;
  std::vector<std::string> dirs = {planner::clusters_dir(root)};
  if (user_clusters_dir(root) != dirs[0] && std::filesystem::exists(user_clusters_dir(root)))
    dirs.insert(dirs.begin(), user_clusters_dir(root));
  for (const std::string& dir : dirs) {
    std::printf("cluster presets (%s):\n", dir.c_str());
    for (const auto& name : planner::cluster_preset_names(dir)) {
      auto c = planner::load_cluster(dir, name);
      std::printf("  %-14s %s\n", name.c_str(), c.ok() ? c->description.c_str() : c.status().message().c_str());
    }
  }
  std::printf("named model shapes:\n");
  for (const auto& n : planner::named_shapes())
    std::printf("  %-16s %9.4g B parameters (published %.*f B)  %s\n", n.shape.name.c_str(),
                static_cast<double>(n.shape.param_count()) / 1e9, n.published_decimals, n.published_billions,
                n.shape.source.c_str());
  std::printf("also: a preset name (configs/*.toml), a run config FILE.toml, or a Hugging Face config.json\n");
  return 0;
}

struct CalibrateArgs {
  int np = 0;
  std::string out, root, gemm32 = "auto", model;
  std::vector<std::string> sets;
  bool quick = false;
};

// --model: the GEMM calls of that run configuration's model at its micro-batch, at tp 1, 2 and its own tp
// (planner::model_gemm_shapes), which the cluster file then prices as measured (docs/plan.md §9).
Result<std::vector<planner::GemmShape>> model_gemms(const CalibrateArgs& a, const std::string& root) {
  if (a.model.empty()) {
    if (!a.sets.empty()) return invalid_argument("plan calibrate: --set applies to --model's run configuration");
    return std::vector<planner::GemmShape>{};
  }
  const bool file = a.model.ends_with(".toml");
  SP_ASSIGN_OR_RETURN(const config::RunConfig c,
                      config::load_run_config(root, file ? "" : a.model, file ? a.model : "", a.sets));
  std::vector<int> tps = {1, 2};
  if (c.parallel.tp > 2) tps.push_back(c.parallel.tp);
  return planner::model_gemm_shapes(c.model, c.train.micro_batch_size, c.train.seq_len, tps);
}

// The fp32 GEMM backend the calibration measures: what a run executes (train.gemm32; "auto" is rank 0's pick for
// this host, kernels/gemm32_auto.h), the same on every rank. The cluster file records it ([device.measured]
// gemm_backend.fp32) and `plan --run` refuses a run that executed another (planner/evaluate_backends.h).
Status set_calibrated_gemm32(comm::Communicator& world, const std::string& asked) {
  SP_ASSIGN_OR_RETURN(kernels::Gemm32Kind kind, kernels::gemm32_kind_from_name(asked));
  std::string name(kernels::gemm32_kind_name(kind));
  if (kind == kernels::Gemm32Kind::kAuto && world.rank() == 0) {
    auto picked = kernels::gemm32_auto(1);
    name = picked.ok() ? std::string(kernels::gemm32_kind_name(picked->kind)) : "openblas";
  }
  name = comm::broadcast_string(world, name);
  SP_ASSIGN_OR_RETURN(kind, kernels::gemm32_kind_from_name(name));
  kernels::set_gemm32(kind);
  return Status();
}

int run_calibrate(const CalibrateArgs& a, CLI::App* cmd) {
  if (!launched_by_mpi()) {
    const int np = a.np > 0 ? a.np : std::max(2, static_cast<int>(std::thread::hardware_concurrency()));
    return relaunch_with_mpirun(np, relaunch_args(*cmd, {"plan", "calibrate"}));
  }
  const std::string root = a.root.empty() ? default_root() : a.root;
  const std::string out = a.out.empty() ? user_clusters_dir(root) + "/this-host.toml" : a.out;
  comm::MpiScope mpi(nullptr, nullptr);
  auto world = comm::make_world_communicator();
  planner::CalibrationOptions o;
  if (a.quick) {
    o.gemm_n = 256;
    o.gemm_seconds = 0.05;
    o.repetitions = 5;
    o.kernels.gemm_sizes = {32, 128};
    o.kernels.gemm_tokens = {32, 128};
    o.kernels.gemm_widths = {32, 64};
    o.kernels.attention_seq = {64, 128};
    o.kernels.activation_bytes = {1 << 16, 1 << 18};
    o.kernels.parameter_bytes = {1 << 16, 1 << 18};
    o.kernels.min_seconds = 0.005;
  }
  auto shapes = model_gemms(a, root);
  if (!shapes.ok()) return report_status(shapes.status());
  o.kernels.model_gemms = *shapes;
  if (Status g = set_calibrated_gemm32(*world, a.gemm32); !g.ok()) return report_status(g, /*all_ranks=*/false);
  auto c = planner::calibrate_this_host(*world, mpi.hostname(), o);
  if (!c.ok()) return report_status(c.status(), /*all_ranks=*/false);
  if (mpi.world_rank() != 0) return 0;
  const std::string when = utc_now();
  planner::ClusterSpec spec = planner::this_host_cluster(*c, when);
  spec.name = std::filesystem::path(out).stem().string();  // `plan --cluster NAME` finds it by its file name
  const std::string text = planner::cluster_to_toml(spec, planner::calibration_comment(*c, when));
  auto check = planner::parse_cluster(text, out);  // what is written must read back
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

struct PublishedArgs {
  std::string table, root, fit_row;
  double efficiency = planner::kDefaultGemmEfficiency;
  bool json = false;
};

int run_published(const PublishedArgs& a) {
  const std::string root = a.root.empty() ? default_root() : a.root;
  const std::string path = a.table.empty() ? root + "/data/published/megatron-ptdp-table1.toml" : a.table;
  auto table = planner::read_published_table(path);
  if (!table.ok()) return report_status(table.status());
  auto cluster = load_cluster_for(root, table->cluster);
  if (!cluster.ok()) return report_status(cluster.status().with_context(path + ": cluster"));
  auto predicted = planner::predict_published(
      *table, *cluster, {.efficiency = a.efficiency, .fit_row = a.fit_row, .dtype = table->precision});
  if (!predicted.ok()) return report_status(predicted.status().with_context(path));
  const std::vector<planner::PublishedPrediction>* rows = &predicted->rows;
  nlohmann::json j = {
      {"format_version", 1},
      {"table", path},
      {"source", table->venue + ", " + table->table},
      {"cluster", table->cluster},
      {"precision", table->precision},
      {"efficiency", predicted->efficiency},
      {"fitted_on", predicted->fit_row.empty() ? nlohmann::json(nullptr) : nlohmann::json(a.fit_row)},
      {"within_15_percent", predicted->within_15_percent},
      {"engine_within_15_percent", predicted->engine_within_15_percent},
      {"schedule", table->schedule.empty() ? nlohmann::json("searched") : nlohmann::json(table->schedule)},
      {"activations",
       table->activations.empty() ? nlohmann::json("fp32 (the engine's)") : nlohmann::json(table->activations)},
      {"flops_definition", table->flops_definition},
      {"assumptions", planner::time_model_assumptions()},
      {"rows", nlohmann::json::array()}};
  for (const auto& p : *rows) j["rows"].push_back(planner::published_prediction_to_json(p));
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s, %s: %s\n", table->venue.c_str(), table->table.c_str(), table->title.c_str());
  const std::string efficiency =
      predicted->fit_row.empty()
          ? fmt::format("{:.0f} % of the GEMM peak (stated, not fitted)", 100 * predicted->efficiency)
          : fmt::format("{:.1f} % of the GEMM peak, FITTED on the row {} alone (its prediction made exact)",
                        100 * predicted->efficiency, predicted->fit_row);
  const std::string as_run =
      (table->activations.empty()
           ? std::string("activations, tp sums and pipeline messages in the engine's fp32")
           : fmt::format("activations, tp sums and pipeline messages in {} as the runs kept them",
                         table->activations)) +
      (table->schedule.empty() ? std::string("; schedule searched")
                               : fmt::format("; the runs' schedule ({}) for pp > 1", table->schedule));
  std::printf(
      "planned on %s in %s at %s; the GPT shapes as their engine counterparts;\n%s; micro-batch and virtual stages "
      "searched (the fastest that fits); TFLOP/s by the table's own FLOPs (%s)\n\n",
      table->cluster.c_str(), table->precision.c_str(), efficiency.c_str(), as_run.c_str(),
      table->flops_definition.c_str());
  std::printf("%-16s %3s %3s %3s %5s %5s  %-34s %9s %9s %7s  %7s %7s  %6s  %s\n", "model", "tp", "pp", "dp", "GPUs",
              "batch", "chosen", "implied s", "planned s", "error", "TFLOP/s", "planned", "bubble", "memory");
  for (const auto& p : *rows)
    std::printf("%-16s %3d %3d %3d %5d %5lld  %-34s %9.2f %9.2f %+6.0f%%  %7.0f %7.0f  %5.1f%%  %.1f GiB%s\n",
                p.run.model.c_str(), p.run.tp, p.run.pp, p.run.dp(), p.run.gpus,
                static_cast<long long>(p.run.global_batch), plan::strategy_name(p.chosen).c_str(), p.implied_seconds,
                p.predicted_seconds, 100 * p.error, p.run.tflops_per_gpu, p.predicted_tflops_per_gpu, 100 * p.bubble,
                p.peak_bytes / double(1 << 30),
                p.over_category.empty() ? "" : (", does not fit: " + p.over_category).c_str());
  std::printf("\nthe predicted step's terms and the term that dominates the error (docs/plan.md §6):\n");
  std::printf("%-16s %8s %8s %8s %8s  %-24s %14s %14s  %s\n", "model", "GEMMs s", "tp s", "idle s", "dp s",
              "dominant term of error", "error under it", "GEMM eff. to close", "engine's fp32 stream: s, error");
  for (const auto& p : *rows)
    std::printf("%-16s %8.2f %8.2f %8.2f %8.2f  %-24s %+13.0f%% %13.1f%%  %s\n", p.run.model.c_str(), p.gemm_s,
                p.pass_comm_s, p.pipeline_idle_s, p.after_pipeline_s, p.error_term.c_str(), 100 * p.error_under_term,
                100 * p.gemm_efficiency_to_close,
                p.engine_priced ? fmt::format("{:8.2f} {:+5.0f}%{}", p.engine_seconds, 100 * p.engine_error,
                                              p.engine_fits ? "" : " (does not fit)")
                                      .c_str()
                                : "n/a");
  std::printf("\n%d of %zu rows within ±15 %% of the published time\n", predicted->within_15_percent, rows->size());
  if (!table->activations.empty())
    std::printf(
        "(%d of %zu with the same candidates priced at the engine's fp32 stream: what the runs' own precision "
        "changes)\n",
        predicted->engine_within_15_percent, rows->size());
  return 0;
}

}  // namespace

void register_plan_subcommands(CLI::App* cmd, CommandResult& result) {
  auto c = std::make_shared<CalibrateArgs>();
  CLI::App* cal =
      cmd->add_subcommand("calibrate", "Measure sgemm FLOP/s per core and MPI latency/bandwidth into a cluster file");
  cal->add_option("--np", c->np, "Ranks to measure with (default: the number of cores, at least 2)")
      ->check(CLI::Range(1, 4096));
  cal->add_option("--out", c->out,
                  "Cluster file to write (default: <root>/configs/clusters/this-host.toml; for an installed binary "
                  "~/.config/shardproof/clusters/this-host.toml)");
  cal->add_option("--root", c->root, "Repository root (default: the source tree)");
  cal->add_flag("--quick", c->quick, "Small sgemm and few repetitions (tests); noisier figures");
  cal->add_option("--gemm32", c->gemm32,
                  "The fp32 GEMM backend to measure, as train.gemm32: auto (default: this host's pick, what a run "
                  "executes by default), openblas or onednn")
      ->check(CLI::IsMember({"auto", "openblas", "onednn"}));
  cal->add_option("--model", c->model,
                  "Also measure this run configuration's own GEMM calls (a preset or FILE.toml; at tp 1, 2 and its "
                  "own), which plans of it then price as measured");
  cal->add_option("--set", c->sets, "key=value override of --model's run configuration");
  cal->callback([c, cal, &result] { result.exit_code = run_calibrate(*c, cal); });

  auto list_root = std::make_shared<std::string>();
  CLI::App* list = cmd->add_subcommand("list", "List cluster presets and named model shapes");
  list->add_option("--root", *list_root, "Repository root (default: the source tree)");
  list->callback([list_root, &result] { result.exit_code = run_list(*list_root); });

  auto pub = std::make_shared<PublishedArgs>();
  CLI::App* published = cmd->add_subcommand(
      "published", "Plan every row of a published throughput table and print predicted next to published");
  published->add_option("--table", pub->table,
                        "Published table (default: data/published/megatron-ptdp-table1.toml; docs/plan.md §6)");
  published->add_option("--efficiency", pub->efficiency, "Fraction of the peak the GEMMs reach (default 0.5)");
  published->add_option("--fit-row", pub->fit_row,
                        "Fit the GEMM efficiency on this row alone (e.g. megatron-18.4b) and predict every row at it");
  published->add_option("--root", pub->root, "Repository root (default: the source tree)");
  published->add_flag("--json", pub->json, "Print JSON instead of text");
  published->callback([pub, &result] { result.exit_code = run_published(*pub); });
}

}  // namespace sp::cli
