// `shardproof plan`: the cluster planner's command line (docs/plan.md).
//   plan --cluster C --model M [--nodes N] [strategy flags] [--json]
//       evaluates one run configuration on the cluster with the engine's own models (planner/evaluate.h):
//       placement and links, memory per rank per category, bytes per group, phase and op priced with the
//       α–β model, the simulated pipeline, step time, tokens/s, MFU and HFU, and every assumption.
//   plan ... --search   ranks every valid strategy by step time and says why each excluded one is excluded.
//   plan calibrate | list | published     cli/plan_subcommands.h
// Exit codes: 0 success, 2 usage or configuration error (a bad cluster or model file, an impossible
// placement), 1 runtime error.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "cli/plan_subcommands.h"
#include "cli/plan_text.h"
#include "cli/run_setup.h"
#include "cli/run_source.h"
#include "comm/topology.h"
#include "config/ds_config.h"
#include "config/hf_config.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "core/log.h"
#include "core/timer.h"
#include "evidence/bundle_paths.h"
#include "evidence/run_dir.h"
#include "planner/cluster.h"
#include "planner/collective_time.h"
#include "planner/evaluate.h"
#include "planner/evaluate_backends.h"
#include "planner/group_links.h"
#include "planner/model_shape.h"
#include "report/render.h"

namespace sp::cli {
namespace {

// --model names a run configuration (a preset or FILE.toml), not a named shape or an HF config.json.
bool names_run_config(const std::string& model) {
  return model.ends_with(".toml") || (!planner::named_shape(model).ok() && !model.ends_with(".json"));
}

// --model: a Hugging Face config.json, a run configuration (.toml), a named shape, or a preset in configs/;
// a run configuration's [model] comes from --model-config when given.
Result<planner::ModelShape> resolve_model(const std::string& root, const std::string& spec,
                                          const std::string& model_config) {
  if (spec.empty()) return invalid_argument("no model");
  if (spec.ends_with(".json")) return planner::read_hf_config(spec);
  if (spec.ends_with(".toml")) {
    SP_ASSIGN_OR_RETURN(config::RunConfig rc,
                        config::load_run_config(root, "", spec, model_config, {}, config::DeepSpeedInput{}));
    return planner::ModelShape::from_llama(rc.model, rc.name, spec);
  }
  auto named = planner::named_shape(spec);
  if (named.ok()) return named;
  if (std::filesystem::exists(root + "/configs/" + spec + ".toml")) {
    SP_ASSIGN_OR_RETURN(config::RunConfig rc,
                        config::load_run_config(root, spec, "", model_config, {}, config::DeepSpeedInput{}));
    return planner::ModelShape::from_llama(rc.model, spec, "configs/" + spec + ".toml [model], data.vocab_size");
  }
  return named.status().with_hint(named.status().hint() + " (presets: configs/*.toml)");
}

struct PlanArgs {
  RunSource source;  // --model-config, --set, --deepspeed, --root (the model itself is --model or --run)
  std::string cluster, model, run, dtype, schedule, recompute, reduction, axis_order, out, precision, grad_dtype;
  int64_t nodes = 0;
  int dp = 0, tp = 0, pp = 0, virtual_stages = 0, zero = -1;
  int64_t global_batch = 0, micro_batch = 0, seq_len = 0;
  double efficiency = planner::kDefaultGemmEfficiency;
  bool json = false, search = false, all_ranks = false;
  bool efficiency_given = false;  // --efficiency: GEMMs at it, not the cluster's measured rates
};

// The peak the GEMMs run at without --dtype: the run's precision where the cluster states its peak (a
// GPU's bf16/fp16 tensor cores), else fp32 (this-host's calibration measures sgemm only).
std::string default_dtype(const planner::ClusterSpec& cluster, const config::RunConfig& config) {
  const std::string p(model::precision_name(config.train.precision.compute));
  return cluster.peak_flops_for(p).ok() ? p : "fp32";
}

// The run being planned: a run configuration's own (--model FILE.toml or a preset, with --set), or the
// engine's defaults around a named shape or a Hugging Face config; then the flags given on top.
Result<config::RunConfig> planned_config(const PlanArgs& a, const std::string& root, const planner::ModelShape& shape,
                                         const planner::ClusterSpec& cluster) {
  config::RunConfig c;
  const bool run_config = names_run_config(a.model);
  if (!a.source.deepspeed.empty() && !a.run.empty())
    return invalid_argument("--deepspeed and --run: a run's configuration is frozen in its contract")
        .with_hint("drop --deepspeed; the run's contract records the ds_config it was given");
  // --deepspeed (docs/deepspeed.md): DeepSpeed's batch rule uses --dp if given, else the configuration's dp.
  const config::DeepSpeedInput deepspeed{.file = a.source.deepspeed, .rule_dp = a.dp > 0 ? a.dp : 0};
  if (!a.run.empty()) {  // a run bundle's frozen configuration: the plan of exactly that run
    SP_ASSIGN_OR_RETURN(const nlohmann::json contract, read_json_file(evidence::RunPaths(a.run).contract()));
    if (!contract.contains("config"))
      return invalid_argument("{}: no \"config\" object", evidence::RunPaths(a.run).contract())
          .with_hint("--run names a run directory written by shardproof train or compare");
    SP_ASSIGN_OR_RETURN(c, config::RunConfig::from_json(contract["config"]));
  } else if (run_config) {
    SP_ASSIGN_OR_RETURN(
        c, a.model.ends_with(".toml")
               ? config::load_run_config(root, "", a.model, a.source.model_config, a.source.sets, deepspeed)
               : config::load_run_config(root, a.model, "", a.source.model_config, a.source.sets, deepspeed));
  } else {
    if (!a.source.sets.empty())
      return invalid_argument("--set applies to a run configuration, not to the named shape '{}'", shape.name)
          .with_hint("use the flags (--global-batch, --micro-batch, --seq-len, ...) or --model FILE.toml");
    c = planner::run_config_around(shape, cluster.axis_order);
    if (!a.source.deepspeed.empty()) {  // the ds_config's batch, precision, ZeRO and optimizer around the shape
      SP_ASSIGN_OR_RETURN(const nlohmann::json ds, config::read_ds_config(a.source.deepspeed));
      nlohmann::json j = c.to_json();
      j["train"]["global_batch"] = 1;                // a placeholder the ds_config's batch keys replace
      j["data"]["vocab_size"] = c.model.vocab_size;  // the shape's own vocabulary
      auto mapping = config::apply_ds_config(ds, a.dp > 0 ? a.dp : c.parallel.dp, j);
      if (!mapping.ok()) return mapping.status().with_context("--deepspeed '" + a.source.deepspeed + "'");
      SP_ASSIGN_OR_RETURN(c, config::RunConfig::from_json(j));
    }
  }
  if (a.global_batch > 0) c.train.global_batch = a.global_batch;
  if (c.train.global_batch <= 0)
    return invalid_argument("plan of '{}' needs --global-batch (sequences per step)", shape.name)
        .with_hint("for example --global-batch 1024");
  if (a.micro_batch > 0) c.train.micro_batch_size = a.micro_batch;
  if (a.seq_len > 0) c.train.seq_len = a.seq_len;
  if (a.dp > 0) c.parallel.dp = a.dp;
  if (a.tp > 0) c.parallel.tp = a.tp;
  if (a.pp > 0) c.parallel.pp = a.pp;
  if (a.virtual_stages > 0) c.parallel.virtual_stages = a.virtual_stages;
  if (a.zero >= 0) c.parallel.zero = a.zero;
  if (!a.axis_order.empty()) c.parallel.axis_order = a.axis_order;
  nlohmann::json overrides = nlohmann::json::object();
  if (!a.schedule.empty()) overrides["parallel"]["schedule"] = a.schedule;
  if (!a.reduction.empty()) overrides["parallel"]["reduction"] = a.reduction;
  if (!a.recompute.empty()) overrides["train"]["recompute"] = a.recompute;
  if (!a.precision.empty()) overrides["train"]["precision"] = a.precision;
  // fp16 needs a loss scaler's settings; the scaler moves no byte and takes no time the plan counts, so a
  // plan without its own [fp16] table takes DeepSpeed's defaults (optim/loss_scaler.h).
  if (a.precision == "fp16" && !c.fp16) overrides["fp16"]["initial_scale_power"] = 16;
  if (!a.grad_dtype.empty()) overrides["train"]["grad_dtype"] = a.grad_dtype;
  if (!overrides.empty()) {  // through the config reader, so the values are checked as in a TOML file
    nlohmann::json j = c.to_json();
    j.merge_patch(overrides);
    SP_ASSIGN_OR_RETURN(c, config::RunConfig::from_json(j));
  }
  return c;
}

// `cluster` with the ranks of the run in `run_dir` on the nodes of their recorded hosts when they ran on more
// than one (topology.json's `host`, planner::with_rank_hosts); unchanged otherwise, or without a topology.json.
Result<planner::ClusterSpec> place_recorded_hosts(const std::string& run_dir, const planner::ClusterSpec& cluster) {
  const std::string path = evidence::RunPaths(run_dir).topology();
  if (!std::filesystem::exists(path)) return cluster;
  SP_ASSIGN_OR_RETURN(const nlohmann::json topology, read_json_file(path));
  if (Status st = comm::validate_topology(topology); !st.ok()) return st.with_context(path);
  std::vector<std::string> hosts;
  for (const auto& r : topology.at("ranks")) hosts.push_back(r.at("host").get<std::string>());
  if (std::all_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return h == hosts.front(); })) return cluster;
  auto placed = planner::with_rank_hosts(cluster, hosts);
  if (!placed.ok()) return placed.status().with_context(path);
  return placed;
}

// Without a run to evaluate (no --global-batch, --run or --search): the cluster, the model and, with
// --dp/--tp/--pp, the link each axis crosses.
int describe_placement(const PlanArgs& a, const planner::ClusterSpec& cl, const planner::ModelShape& model) {
  const planner::ClusterSpec* cluster = &cl;
  const planner::ModelShape* mp = &model;
  nlohmann::json out = {{"cluster", cluster->to_json()}, {"model", mp->to_json()}};
  const bool strategy = a.dp > 0 || a.tp > 0 || a.pp > 0;
  std::vector<std::pair<std::string, planner::GroupLink>> links;
  if (strategy) {
    const int dp = std::max(a.dp, 1), tp = std::max(a.tp, 1), pp = std::max(a.pp, 1);
    auto grid = planner::place_on_cluster(*cluster, dp, tp, pp);
    if (!grid.ok()) return report_status(grid.status());
    links = {{"tp", planner::axis_link(*cluster, *grid, comm::Axis::kTp, planner::HopPattern::kRing)},
             {"dp", planner::axis_link(*cluster, *grid, comm::Axis::kDp, planner::HopPattern::kRing)},
             {"pp", planner::axis_link(*cluster, *grid, comm::Axis::kPp, planner::HopPattern::kChain)}};
    out["strategy"] = {{"dp", dp}, {"tp", tp}, {"pp", pp}, {"grid", grid->describe()}};
    for (const auto& [axis, l] : links) out["links"][axis] = l.to_json();
    out["assumptions"] = planner::time_model_assumptions();
  }
  out["next"] = "memory, bytes and step time: give --global-batch (or --run DIR, or a run configuration)";
  if (a.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%s\n", cluster_line(*cluster).c_str());
  const auto& m = *mp;
  std::printf(
      "model %s (%s): %.4g billion parameters; L %lld, C %lld, H %lld, KV %lld, F %lld, V %lld, max_seq %lld\n"
      "  source: %s\n",
      m.name.c_str(), planner::model_family_name(m.family).c_str(), static_cast<double>(m.param_count()) / 1e9,
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
    for (const auto& s : planner::time_model_assumptions()) std::printf("  - %s\n", s.c_str());
  }
  std::printf("%s\n", out["next"].get<std::string>().c_str());
  return 0;
}

// --out DIR: the document as DIR/plan.json and its page DIR/report.html (docs/report.md); prints both paths
// (to stderr when stdout carries the JSON).
Status write_plan_dir(const std::string& out, const nlohmann::json& j, bool json_on_stdout) {
  SP_RETURN_IF_ERROR(evidence::refuse_evidence_target(out, "--out"));  // never a run's or a sealed bundle's page
  SP_RETURN_IF_ERROR(make_directories(out));
  const evidence::RunPaths paths(out);
  SP_RETURN_IF_ERROR(write_file_atomic(paths.file(evidence::kPlanFile), j.dump(1) + "\n"));
  SP_ASSIGN_OR_RETURN(const std::vector<std::string> problems, report::write_report(out));
  for (const std::string& p : problems) log_line(LogLevel::kQuiet, "report: " + p);
  std::fprintf(json_on_stdout ? stderr : stdout, "plan: %s\nreport: %s\n", paths.file(evidence::kPlanFile).c_str(),
               paths.file(evidence::kReportFile).c_str());
  return problems.empty() ? Status() : internal_error("the plan's report lists {} problem(s)", problems.size());
}

// A search that takes more than a few seconds says how far it is, on stderr, every 5 s.
planner::SearchProgress search_progress() {
  auto started = std::make_shared<Stopwatch>();
  auto last = std::make_shared<double>(0.0);
  return [started, last](int64_t judged, int64_t enumerated) {
    const double now = started->seconds();
    if (now - *last < 5.0) return;
    *last = now;
    std::fprintf(stderr, "plan: search: %lld of %lld strategies judged (%.0f %%), %.0f s\n",
                 static_cast<long long>(judged), static_cast<long long>(enumerated),
                 100.0 * static_cast<double>(judged) / static_cast<double>(std::max<int64_t>(enumerated, 1)), now);
  };
}

// The plan's document: with the model note, written to DIR/plan.json for --out, printed for --json (then the
// exit code), else its text starts with the cluster line and nullopt lets the caller print the rest.
std::optional<int> emit_plan(const PlanArgs& a, const std::string& counterpart_note,
                             const planner::ClusterSpec& cluster, nlohmann::json& j) {
  if (!counterpart_note.empty()) j["model_note"] = counterpart_note;
  if (!a.out.empty())
    if (Status st = write_plan_dir(a.out, j, a.json); !st.ok()) return report_status(st);
  if (a.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%s\n", cluster_line(cluster).c_str());
  return std::nullopt;
}

// `plan --search`: every valid strategy on the cluster, ranked by step time, for the query's model and batch.
int run_search(const PlanArgs& a, const planner::PlanQuery& q, const planner::ModelShape& model,
               const std::string& counterpart_note) {
  const planner::ClusterSpec& cluster = q.cluster;
  const config::RunConfig& config = q.config;
  const planner::SearchSpace space =
      planner::engine_search_space(cluster.devices(), config.train.global_batch, config.parallel.reduction);
  auto r = planner::search_strategies(model, space, planner::engine_evaluators(q), search_progress());
  if (!r.ok()) return report_status(r.status());
  nlohmann::json j = planner::search_result_to_json(*r);
  j["format_version"] = 1;
  j["inputs"] = {{"cluster", cluster.to_json()},
                 {"model", model.to_json()},
                 {"global_batch", config.train.global_batch},
                 {"seq_len", config.train.seq_len},
                 {"dtype", q.dtype},
                 {"efficiency", q.efficiency},
                 {"reduction", config::reduction_name(config.parallel.reduction)}};
  j["assumptions"] = planner::time_model_assumptions();
  if (std::optional<int> rc = emit_plan(a, counterpart_note, cluster, j)) return *rc;
  if (!counterpart_note.empty()) std::printf("note: %s\n", counterpart_note.c_str());
  print_search(j);
  return 0;
}

int run_plan(const PlanArgs& args) {
  const std::string root = args.source.root_or_default();
  // --model-config alone plans the Hugging Face config (as --model config.json); with a run configuration
  // (a preset or FILE.toml) it replaces that configuration's [model].
  PlanArgs a = args;
  if (!a.source.model_config.empty()) {
    if (a.model.empty() && a.run.empty()) {
      a.model = a.source.model_config;
      a.source.model_config.clear();
    } else if (!a.run.empty() || !names_run_config(a.model)) {
      return report_status(
          invalid_argument("--model-config replaces the [model] of a run configuration; '{}' is not one",
                           a.run.empty() ? a.model : "--run " + a.run)
              .with_hint("give --model PRESET or --model FILE.toml with it, or --model-config alone"));
    }
  }
  if (a.cluster.empty() || (a.model.empty() == a.run.empty()))
    return report_status(invalid_argument("plan needs --cluster and one of --model or --run")
                             .with_hint("for example: shardproof plan --cluster dgx-a100 --nodes 16 --model llama-65b "
                                        "--global-batch 1024 --dp 16 --tp 8 --pp 1; `shardproof plan list` names the "
                                        "presets"));
  auto cluster = load_cluster_for(root, a.cluster);
  if (!cluster.ok()) return report_status(cluster.status());
  if (a.nodes > 0) {
    cluster = planner::with_nodes(*cluster, a.nodes);
    if (!cluster.ok()) return report_status(cluster.status());
  }
  // A run across hosts is priced where it ran: each rank on the node of its recorded host (topology.json),
  // not by slot; a run on one host keeps the by-slot placement on any cluster.
  if (!a.run.empty()) {
    auto placed = place_recorded_hosts(a.run, *cluster);
    if (!placed.ok()) return report_status(placed.status());
    cluster = std::move(*placed);
  }
  Result<planner::ModelShape> model = invalid_argument("no model");
  if (!a.model.empty()) {
    model = resolve_model(root, a.model, a.source.model_config);
    if (!model.ok()) return report_status(model.status());
  }
  // A GPT shape (the published studies') is planned as its engine counterpart: the engine's memory and
  // traffic models are LLaMA's (planner/model_shape.h engine_counterpart, docs/plan.md §2).
  std::string counterpart_note;
  if (model.ok() && model->family != planner::ModelFamily::kLlama) {
    const planner::ModelShape c = model->engine_counterpart();
    counterpart_note = fmt::format(
        "{} is a {} model ({:.4g} B parameters); planned as its engine counterpart: LLaMA blocks with a SwiGLU MLP "
        "of F = {} (about the GeLU MLP's weights per token), no biases or learned positions ({:.4g} B parameters)",
        model->name, planner::model_family_name(model->family), model->param_count() / 1e9, c.ffn_dim,
        c.param_count() / 1e9);
    model = c;
  }
  const bool run_config = !a.model.empty() && names_run_config(a.model);
  if (a.run.empty() && !a.search && a.global_batch == 0 && (!run_config || (a.dp == 0 && a.tp == 0 && a.pp == 0)))
    return describe_placement(a, *cluster, *model);
  auto config = planned_config(a, root, a.model.empty() ? planner::ModelShape{} : *model, *cluster);
  if (!config.ok()) return report_status(config.status());
  // The engine ties no weight across pipeline stages: a GPT counterpart's LM head becomes its own weight on
  // the last stage (Megatron keeps a copy there too; the all-reduce of the two copies' gradients is not
  // priced). The search unties it for every strategy, pp = 1 included.
  if (!counterpart_note.empty() && config->model.tie_embeddings && (a.search || config->parallel.pp > 1)) {
    config->model.tie_embeddings = false;
    counterpart_note += a.search ? "; embeddings untied in the search (the engine ties no weight across stages)"
                                 : "; embeddings untied (pp > 1: the engine ties no weight across stages)";
  }
  if (!a.run.empty()) model = planner::ModelShape::from_llama(config->model, config->name, a.run + "/contract.json");
  // --dtype is the GEMMs' speed only: a 16-bit one without --precision (or a run/ds_config saying so) still plans
  // fp32 states, which a reader of "--dtype bf16" does not expect (issue 33).
  const std::string_view planned(model::precision_name(config->train.precision.compute));
  if ((a.dtype == "bf16" || a.dtype == "fp16") && a.precision.empty() && planned == "fp32")
    std::fprintf(stderr,
                 "shardproof: warning: --dtype %s prices the GEMMs at the %s peak only; memory is planned with "
                 "fp32 states (train.precision = fp32)\n  hint: add --precision bf16 (or fp16) to plan 16-bit "
                 "parameters and gradients with fp32 masters\n",
                 a.dtype.c_str(), a.dtype.c_str());
  planner::PlanQuery q{.cluster = *cluster,
                       .config = *config,
                       .dtype = a.dtype.empty() ? default_dtype(*cluster, *config) : a.dtype,
                       .efficiency = a.efficiency,
                       .use_measured = !a.efficiency_given,
                       .all_ranks = a.all_ranks};
  // A run is priced with the rates of the GEMM backend it executed, or not at all (planner/evaluate_backends.h).
  if (!a.run.empty() && q.use_measured) {
    auto contract = read_json_file(evidence::RunPaths(a.run).contract());
    if (!contract.ok()) return report_status(contract.status());
    if (Status b = planner::check_calibrated_backend(*contract, a.run, *cluster, a.cluster, q.dtype); !b.ok())
      return report_status(b);
  }
  if (a.search) return run_search(a, q, *model, counterpart_note);
  auto e = planner::evaluate_plan(q);
  if (!e.ok()) return report_status(e.status());
  nlohmann::json j = planner::plan_evaluation_to_json(q, *e);
  if (std::optional<int> rc = emit_plan(a, counterpart_note, *cluster, j)) return *rc;
  const auto& m = *model;
  std::printf("model %s: %.4g billion parameters; L %lld, C %lld, H %lld, KV %lld, F %lld, V %lld\n", m.name.c_str(),
              static_cast<double>(m.param_count()) / 1e9, static_cast<long long>(m.n_layers),
              static_cast<long long>(m.dim), static_cast<long long>(m.n_heads), static_cast<long long>(m.n_kv_heads),
              static_cast<long long>(m.ffn_dim), static_cast<long long>(m.vocab_size));
  if (!counterpart_note.empty()) std::printf("note: %s\n", counterpart_note.c_str());
  print_evaluation(j);
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
  add_run_source_options(
      cmd, a->source,
      {.files = false,
       .model_config_help = "A Hugging Face LLaMA config.json: alone, the model to plan; with --model PRESET or "
                            "FILE.toml, that run's [model] (docs/huggingface.md)",
       .set_help = "key=value override of a run configuration (--model FILE.toml or a preset)",
       .deepspeed_help = "DeepSpeed ds_config.json: its batch, ZeRO stage, precision and optimizer "
                         "(docs/deepspeed.md); the flags still win",
       .root_help = "Repository root for configs/ (default: the source tree)"});
  cmd->add_option("--run", a->run, "A run directory: plan exactly its configuration (contract.json)");
  // Ranges with small integer bounds: CLI11's PositiveNumber prints the whole double range in its message.
  const CLI::Range devices(int64_t{1}, planner::kMaxClusterDevices);
  cmd->add_option("--nodes", a->nodes, "Number of nodes (overrides the cluster file's nodes.count)")->check(devices);
  cmd->add_option("--dp", a->dp, "Data-parallel degree")->check(devices);
  cmd->add_option("--tp", a->tp, "Tensor-parallel degree")->check(devices);
  cmd->add_option("--pp", a->pp, "Pipeline-parallel degree")->check(devices);
  cmd->add_option("--virtual-stages", a->virtual_stages, "Virtual stages per pipeline rank (interleaved)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--schedule", a->schedule, "Pipeline schedule: gpipe, 1f1b, interleaved, zb-h1");
  cmd->add_option("--zero", a->zero, "ZeRO stage 0-3")->check(CLI::Range(0, 3));
  cmd->add_option("--recompute", a->recompute, "Activation recompute: none, full");
  const CLI::Range counts(int64_t{1}, int64_t{1} << 40);
  cmd->add_option("--global-batch", a->global_batch, "Sequences per step")->check(counts);
  cmd->add_option("--micro-batch", a->micro_batch, "Sequences per micro-batch")->check(counts);
  cmd->add_option("--seq-len", a->seq_len, "Tokens per sequence")->check(counts);
  cmd->add_option("--reduction", a->reduction, "deterministic or fast (default: fast for a named shape)");
  cmd->add_option("--axis-order", a->axis_order, "Rank grid order, fastest axis first (default: the cluster's)");
  cmd->add_option("--dtype", a->dtype,
                  "Which peak the GEMMs run at: a key of the cluster's peak_tflops (default: the run's "
                  "precision where the cluster has its peak, else fp32)");
  CLI::Option* efficiency = cmd->add_option(
      "--efficiency", a->efficiency,
      "Fraction of that peak the GEMMs reach (default 0.5); given, it replaces a calibrated cluster's measured rates");
  cmd->add_option("--precision", a->precision, "train.precision of the plan: fp32, bf16, fp16 (default: fp32)");
  cmd->add_option("--grad-dtype", a->grad_dtype, "train.grad_dtype: fp32 or the precision's 16-bit type");
  cmd->add_flag("--search", a->search, "Rank every valid strategy on the cluster by step time");
  cmd->add_flag("--all-ranks", a->all_ranks, "Evaluate every rank (default: all up to 64 ranks, else one per class)");
  cmd->add_flag("--json", a->json, "Print JSON instead of text");
  cmd->add_option("--out", a->out, "Also write DIR/plan.json and its page DIR/report.html (shardproof report)");

  register_plan_subcommands(cmd, result);

  cmd->callback([a, cmd, efficiency, &result] {
    if (!cmd->get_subcommands().empty()) return;  // calibrate, list or published ran
    a->efficiency_given = efficiency->count() > 0;
    result.exit_code = run_plan(*a);
  });
}

}  // namespace sp::cli
