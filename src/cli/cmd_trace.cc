// `shardproof trace check DIR [--json FILE]` and `shardproof trace chrome DIR --out FILE`.
// Single-process commands over a finished (or crashed) run directory; no MPI.
// check: exit 0 when every group's members issued the same sequence, every p2p message was
// matched and the traffic equals comm_predicted.json (when present), 1 with the first mismatch otherwise, 2 on usage
// errors (no such DIR, no trace/). Reference: docs/formats/trace.md, evidence/trace_check.h, evidence/trace_chrome.h.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/file_io.h"
#include "evidence/trace_check.h"
#include "evidence/trace_chrome.h"

namespace sp::cli {
namespace {
struct TraceOptions {
  std::string dir;
  std::string json_out;
  std::string chrome_out;
};
}  // namespace

void register_trace(CLI::App& app, CommandResult& result) {
  auto opts = std::make_shared<TraceOptions>();
  CLI::App* trace = app.add_subcommand("trace", "check a run's collective traces or export them for chrome://tracing");
  trace->require_subcommand(1);

  CLI::App* check = trace->add_subcommand(
      "check",
      "prove that all members of every group issued the same collectives (exit 0), or name the first "
      "mismatch (exit 1)");
  check->add_option("dir", opts->dir, "run directory holding trace/rank-NNNNN.jsonl and topology.json")->required();
  check->add_option("--json", opts->json_out, "also write the full report (mismatches, traffic) as JSON to this file");
  check->callback([opts, &result] {
    Result<evidence::TraceReport> report = evidence::check_trace_dir(opts->dir);
    if (!report.ok()) {
      result.exit_code = report_status(report.status());
      return;
    }
    const std::string text = report->summary();
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!opts->json_out.empty()) {
      if (Status s = write_file_atomic(opts->json_out, report->to_json().dump(2) + "\n"); !s.ok()) {
        result.exit_code = report_status(s);
        return;
      }
    }
    result.exit_code = report->consistent() && (!report->prediction_found || report->matches_prediction()) ? 0 : 1;
  });

  CLI::App* chrome = trace->add_subcommand("chrome", "export the traces as Chrome trace-event JSON (ui.perfetto.dev)");
  chrome->add_option("dir", opts->dir, "run directory holding trace/rank-NNNNN.jsonl")->required();
  chrome->add_option("--out", opts->chrome_out, "output file (.json)")->required();
  chrome->callback([opts, &result] {
    result.exit_code = report_status(evidence::write_chrome_trace(opts->dir, opts->chrome_out));
    if (result.exit_code == 0) std::printf("wrote %s\n", opts->chrome_out.c_str());
  });
}

}  // namespace sp::cli
