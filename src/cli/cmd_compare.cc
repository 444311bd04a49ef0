// `shardproof compare`: every strategy of a list on the same contract, one mpirun each, side by side;
// `shardproof bubble DIR`: the measured pipeline bubble of one run next to its theory.
// compare validates the whole list first (grammar: exit 2), runs dp1 (the reference) first, then each
// strategy into DIR/<label>/ with its output in DIR/logs/<label>.log; a strategy RunPlan::make rejects
// or whose run fails gets an error row instead of stopping the table. Exit 0 when every row is ok
// (strategy_table.h StrategyRow::ok), 1 otherwise. Reference: docs/compare.md.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "cli/run_setup.h"
#include "cli/run_source.h"
#include "core/file_io.h"
#include "core/timer.h"
#include "evidence/bubble.h"
#include "evidence/bundle_paths.h"
#include "evidence/run_dir.h"
#include "evidence/strategy_table.h"
#include "plan/run_plan.h"
#include "plan/strategy.h"
#include "proof/equivalence.h"
#include "report/render.h"

namespace sp::cli {
namespace {

namespace fs = std::filesystem;

struct CompareOpts {
  RunSource source;  // the base configuration every strategy overrides
  std::string out, cache, strategies;
};

// The most telling line of a failed run's log: the first "error:" line, else the last non-empty one.
std::string log_summary(const std::string& log_path) {
  auto text = read_file(log_path, uint64_t{1} << 26);
  if (!text.ok()) return "(no log)";
  std::string last, first_error;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t end = text->find('\n', pos);
    if (end == std::string::npos) end = text->size();
    const std::string line = text->substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    last = line;
    if (first_error.empty() && line.find("error:") != std::string::npos) first_error = line;
  }
  std::string s = first_error.empty() ? last : first_error;
  if (s.size() > 300) s = s.substr(0, 300) + "…";
  return s;
}

// DIR/<label> must be absent, empty or an earlier run's (only files a run writes, no seal) to be replaced.
Status prepare_run_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return Status();
  SP_ASSIGN_OR_RETURN(const evidence::RunDirContents c, evidence::inspect_run_dir(dir));
  if (!c.foreign.empty() || c.seal)
    return invalid_argument("'{}' exists and is not a shardproof run directory; compare will not replace it", dir)
        .with_hint("choose another --out or remove the directory");
  fs::remove_all(dir, ec);
  if (ec) return io_error("cannot remove the earlier run '{}': {}", dir, ec.message());
  return Status();
}

// The row's equivalence to the reference in the class its contract promises (proof/equivalence.h).
void fill_equivalence(evidence::StrategyRow& row, const std::string& dir, const std::string& reference_dir) {
  if (reference_dir.empty()) {
    row.equivalence = "no reference";
    return;
  }
  auto e = proof::compare_runs(evidence::RunPaths(dir), evidence::RunPaths(reference_dir));
  if (!e.ok()) {
    row.equivalence = "no reference";
    row.first_divergence = e.status().message();
    return;
  }
  const evidence::Comparison& c = e->comparison;
  row.equivalence = evidence::equivalence_name(c.verdict);
  row.max_rel_loss = c.max_rel_loss;
  row.max_rel_param = c.max_rel_param;
  row.max_rel_grad_first = c.max_rel_grad_first;
  row.max_rel_grad_later = c.max_rel_grad_later;
  if (!c.problems.empty())
    row.first_divergence = c.problems.front();
  else if (!c.divergence.empty())
    row.first_divergence = c.divergence.front().to_string();
}

evidence::StrategyRow error_row(const plan::NamedStrategy& e, const std::vector<std::string>& overrides,
                                const std::string& dir, const std::string& error) {
  evidence::StrategyRow row;
  row.label = e.label;
  row.dir = dir;
  row.overrides = overrides;
  row.dp = e.strategy.dp;
  row.tp = e.strategy.tp;
  row.pp = e.strategy.pp;
  row.zero = e.strategy.zero;
  row.world = e.strategy.world();
  row.schedule = config::schedule_name(e.strategy.schedule);
  row.error = error;
  row.exit_code = -1;
  return row;
}

int run_compare(const CompareOpts& o) {
  if (launched_by_mpi())
    return report_status(invalid_argument("shardproof compare was started under mpirun")
                             .with_hint("run it directly: it starts one mpirun per strategy itself"));
  const std::string root = o.source.root_or_default();
  // --deepspeed: the batch rule is checked at the base configuration's dp (before the strategies' overrides)
  // for every strategy, so that all of them train one batch under one contract (as prove's stages do).
  config::DeepSpeedInput deepspeed{.file = o.source.deepspeed};
  auto base = o.source.load(deepspeed);
  if (!base.ok()) return report_status(base.status());
  deepspeed.rule_dp = base->parallel.dp;
  const plan::Strategy base_strategy = plan::strategy_of(*base);
  auto named = plan::parse_strategy_list(o.strategies, base_strategy);
  if (!named.ok()) return report_status(named.status());
  // The reference: the base's strategy on one device (its schedule, recompute and reduction).
  const plan::Strategy reference = *plan::parse_strategy("dp1", base_strategy);
  const std::vector<plan::NamedStrategy> list = plan::with_reference_first(*named, reference);
  if (Status st = make_directories(o.out + "/logs"); !st.ok()) return report_status(st);

  std::vector<evidence::StrategyRow> rows;
  std::string ref_dir;
  for (size_t i = 0; i < list.size(); ++i) {
    const plan::NamedStrategy& e = list[i];
    const bool is_reference = i == 0;
    const int world = e.strategy.world();
    const std::string dir = o.out + "/" + e.label;
    const std::string log_path = o.out + "/logs/" + e.label + ".log";
    // The run's configuration: the base with the strategy applied; its `train` child gets the same as --set.
    config::RunConfig config = *base;
    plan::apply(e.strategy, config);
    const std::vector<std::string> overrides = plan::strategy_sets(e.strategy, base_strategy);
    std::fprintf(stderr, "compare [%zu/%zu] %s (%d rank%s): ", i + 1, list.size(), e.label.c_str(), world,
                 world == 1 ? "" : "s");
    std::fflush(stderr);
    Status st = plan::RunPlan::make(config, world).status();
    if (st.ok()) st = prepare_run_dir(dir);
    if (!st.ok()) {
      std::fprintf(stderr, "not run: %s\n", st.message().c_str());
      rows.push_back(error_row(e, overrides, dir, "not run: " + st.message()));
      continue;
    }
    RunSource source = o.source;  // the base, then the strategy's overrides
    source.sets.insert(source.sets.end(), overrides.begin(), overrides.end());
    std::vector<std::string> args = {"train", "--out", dir, "--quiet", "--root", root};
    if (!o.cache.empty()) args.insert(args.end(), {"--cache", o.cache});
    const std::vector<std::string> from = source.train_args(deepspeed.rule_dp);
    args.insert(args.end(), from.begin(), from.end());
    Stopwatch watch;
    const int rc = run_with_mpirun(world, args, log_path);
    evidence::StrategyRow row;
    if (rc != 0) {
      row =
          error_row(e, overrides, dir, fmt::format("run exited {}: {} (log: {})", rc, log_summary(log_path), log_path));
      row.exit_code = rc;
    } else {
      row = evidence::strategy_row_of_run(dir, is_reference ? std::string() : ref_dir);
      row.label = e.label;
      row.overrides = overrides;
      if (!is_reference) fill_equivalence(row, dir, ref_dir);
    }
    if (is_reference && rc == 0) ref_dir = dir;
    std::fprintf(stderr, "%s in %.1f s%s\n", row.ok() ? "ok" : "FAIL", watch.seconds(),
                 row.equivalence.empty() ? "" : (", " + row.equivalence).c_str());
    rows.push_back(std::move(row));
  }
  evidence::fill_ratios(rows);

  const RunSource& s = o.source;
  const std::string title = s.config.empty()
                                ? fmt::format("shardproof compare: preset {}", s.preset.empty() ? "tiny" : s.preset)
                                : fmt::format("shardproof compare: {} ({})", s.config, base->name);
  std::string md = evidence::strategy_table_markdown(rows, title);
  md += fmt::format("\nCharts of the same: [{0}]({0}) (docs/report.md).\n", evidence::kReportFile);
  nlohmann::json j = evidence::strategy_table_json(rows);
  j["preset"] = s.preset;
  j["config_file"] = s.config;
  j["sets"] = s.sets;
  j["strategies"] = o.strategies;
  const evidence::RunPaths out(o.out);  // the compare directory's own files (bundle_paths.h)
  if (Status st = write_file_atomic(out.file(evidence::kCompareSummaryFile), md); !st.ok()) return report_status(st);
  if (Status st = write_file_atomic(out.file(evidence::kCompareFile), j.dump(2) + "\n"); !st.ok())
    return report_status(st);
  std::fputs(md.c_str(), stdout);
  bool all_ok = true;
  for (const auto& r : rows) all_ok = all_ok && r.ok();
  std::fprintf(stdout, "\n%s: %s (%s, %s)\n", all_ok ? "PASS" : "FAIL",
               all_ok ? "every strategy ran, matched dp1 and its predictions" : "see the rows marked FAIL or ERROR",
               out.file(evidence::kCompareSummaryFile).c_str(), out.file(evidence::kCompareFile).c_str());
  if (auto r = report::write_report(o.out); r.ok())
    std::fprintf(stdout, "report: %s\n", out.file(evidence::kReportFile).c_str());
  else
    std::fprintf(stdout, "report: not written: %s\n", r.status().message().c_str());
  return all_ok ? 0 : 1;
}

int run_bubble(const std::string& dir, const std::string& json_out) {
  auto rep = evidence::bubble_of_run(dir);
  if (!rep.ok()) return report_status(rep.status());
  std::fputs(rep->to_markdown().c_str(), stdout);
  if (!json_out.empty())
    if (Status st = write_file_atomic(json_out, rep->to_json().dump(2) + "\n"); !st.ok()) return report_status(st);
  return 0;
}

}  // namespace

void register_compare(CLI::App& app, CommandResult& result) {
  auto o = std::make_shared<CompareOpts>();
  CLI::App* cmd = app.add_subcommand("compare",
                                     "Run several parallel strategies on one contract and compare them "
                                     "with dp=1 side by side (docs/compare.md)");
  add_run_source_options(
      cmd, o->source,
      {.model_config_help = "The [model] from a Hugging Face LLaMA config.json, before --set (docs/huggingface.md)",
       .set_help = "Override a key for every strategy: --set train.steps=5 (repeatable)",
       .deepspeed_help = "DeepSpeed ds_config.json for every strategy (docs/deepspeed.md); its batch rule is checked "
                         "at the dp before the strategies' overrides"});
  cmd->add_option("--strategies", o->strategies,
                  "Comma-separated strategies, each tokens joined by '-': dpN tpN ppN zeroN gpipe 1f1b "
                  "interleaved[V] zbh1 recompute selective fast sp mbN ps-wN-sN, e.g. "
                  "dp2,zero1-dp2,tp2,pp2-gpipe,dp2-tp2-pp2 (dp1 always runs first; docs/compare.md §Grammar)")
      ->required();
  cmd->add_option("--out", o->out, "Directory for the runs (DIR/<strategy>/), logs, compare.md and compare.json")
      ->required();
  cmd->add_option("--cache", o->cache, "Prepared-data cache directory (default: <root>/.shardproof-cache)");
  cmd->callback([o, &result] { result.exit_code = run_compare(*o); });

  struct BubbleOpts {
    std::string dir, json;
  };
  auto b = std::make_shared<BubbleOpts>();
  CLI::App* bub = app.add_subcommand("bubble",
                                     "Print the measured pipeline bubble of a run per stage next to its "
                                     "theory (docs/compare.md)");
  bub->add_option("DIR", b->dir, "Run directory holding timeline/, topology.json and contract.json")->required();
  bub->add_option("--json", b->json, "Also write the report (with every rank and step) as JSON to this file");
  bub->callback([b, &result] { result.exit_code = run_bubble(b->dir, b->json); });
}

}  // namespace sp::cli
