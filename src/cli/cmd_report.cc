// `shardproof report DIR [--out FILE]`: one self-contained HTML page for a proof bundle, a run bundle or
// a compare directory (docs/report.md), written to DIR/report.html unless --out names another file.
// Not the error printer (cli/report.cc). The page's data are report::report_data(DIR), a pure function
// of the bundle's files, which `verify` recomputes. Exit 0: written and complete; 1: written, but the
// bundle lacks files (each named, on stderr and in the page); 2: DIR is not a bundle.
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "evidence/bundle_paths.h"
#include "evidence/run_dir.h"
#include "report/render.h"

namespace sp::cli {

int run_report(const std::string& dir, const std::string& out) {
  // --out writes the page elsewhere: never into a run directory or a sealed bundle (DIR's own report.html,
  // the default, is the one page there that is derived and may be written again).
  if (!out.empty() &&
      evidence::resolved_path(out) != evidence::resolved_path(evidence::ProofPaths(dir).file(evidence::kReportFile)))
    if (Status s = evidence::refuse_evidence_target(out, "--out"); !s.ok()) return report_status(s);
  auto problems = report::write_report(dir, out);
  if (!problems.ok()) return report_status(problems.status());
  const std::string path = out.empty() ? evidence::ProofPaths(dir).file(evidence::kReportFile) : out;
  if (!problems->empty()) {
    std::string text = fmt::format("error: the bundle '{}' is incomplete; the report says what is missing:", dir);
    for (const std::string& p : *problems) text += "\n  - " + p;
    std::fprintf(stderr, "%s\nreport: %s (incomplete)\n", text.c_str(), path.c_str());
    return 1;
  }
  std::printf("report: %s\n", path.c_str());
  return 0;
}

void register_report(CLI::App& app, CommandResult& result) {
  struct Opts {
    std::string dir, out;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("report",
                                     "Write one self-contained HTML report (gate, pipeline, memory, traffic, "
                                     "divergence, curves, checkpoints) for a bundle (docs/report.md)");
  cmd->add_option("DIR", o->dir, "A proof bundle (prove --out), a run (train --out) or a compare directory")
      ->required();
  cmd->add_option("--out", o->out, "The page to write (default: DIR/report.html)");
  cmd->callback([o, &result] { result.exit_code = run_report(o->dir, o->out); });
}

}  // namespace sp::cli
