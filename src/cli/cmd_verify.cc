// `shardproof verify RUN --against REF`: classify a run against a reference from their evidence
// files alone (bitwise-equal / within-tolerance / divergent) and report the first divergence.
// `shardproof verify BUNDLE`: re-derive a proof bundle's gate from its files (parallel/proof.h) for a
// third party, and compare it with the gate.json the bundle carries.
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "core/file_io.h"
#include "core/log.h"
#include "cli/prove.h"
#include "evidence/compare.h"
#include "parallel/proof.h"
#include "report/render.h"
#include "report/report_data.h"

namespace sp::cli {

static Status verify_against(const std::string& run, const std::string& ref, const std::string& json_out, int& rc) {
  SP_ASSIGN_OR_RETURN(evidence::Comparison c,
                      evidence::compare_checksums(run + "/checksums.jsonl", ref + "/checksums.jsonl"));
  std::string text = fmt::format("{} vs {}: {} ({} of {} records bitwise equal)\n", run, ref,
                                 evidence::equivalence_name(c.verdict), c.bitwise_records, c.records);
  text += fmt::format("  max relative difference: loss {:.3g}, params {:.3g}, first-step grads {:.3g}, later grads {:.3g}\n",
                      c.max_rel_loss, c.max_rel_param, c.max_rel_grad_first, c.max_rel_grad_later);
  if (!c.first_mismatch.empty()) text += "  first mismatch:   " + c.first_mismatch[0].to_string() + "\n";
  if (!c.divergence.empty()) {
    text += "  FIRST DIVERGENCE: " + c.divergence[0].to_string() + "\n  propagation:";
    for (const auto& [s, n] : c.divergent_per_step) text += fmt::format(" step {}: {} records;", s, n);
    text += "\n";
  }
  std::fputs(text.c_str(), stdout);
  if (!json_out.empty()) SP_RETURN_IF_ERROR(write_file_atomic(json_out, c.to_json().dump(2) + "\n"));
  rc = c.verdict == evidence::Equivalence::kDivergent ? 1 : 0;
  return Status();
}

// Exit 0 PASS, 1 FAIL (naming the criterion and the file), 2 not a bundle.
static int verify_bundle(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir + "/prove.json", ec))
    return report_status(invalid_argument("'{}' is not a proof bundle (no prove.json)", dir)
                             .with_hint("verify a `shardproof prove` bundle, or compare runs: verify RUN --against REF"));
  auto verdict = parallel::derive_gate(dir);
  if (!verdict.ok()) {
    std::printf("verdict: FAIL: %s\n", verdict.status().message().c_str());
    return 1;
  }
  print_verdict(*verdict, dir);
  // The bundle's own gate.json must say what the files say.
  if (auto stored = parallel::read_json_file(dir + "/gate.json"); !stored.ok()) {
    std::printf("gate.json: %s\n", stored.status().message().c_str());
    return 1;
  } else if ((stored->value("verdict", std::string()) == "PASS") != verdict->gate.passed()) {
    std::printf("gate.json: says %s, the files say %s\n", stored->value("verdict", std::string("?")).c_str(),
                verdict->gate.passed() ? "PASS" : "FAIL");
    return 1;
  }
  // report.html is derived too (report/render.h): when present, it must show the bundle's data.
  if (std::error_code ec; std::filesystem::exists(dir + "/" + report::kReportFileName, ec))
    if (Status s = report::check_report(dir); !s.ok()) {
      std::printf("verdict: FAIL (report.html does not show this bundle)\n  %s\n  hint: %s\n", s.message().c_str(),
                  s.hint().c_str());
      return 1;
    }
  return verdict->gate.passed() ? 0 : 1;
}

void register_verify(CLI::App& app, CommandResult& result) {
  struct Opts {
    std::string run, against, json;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Re-derive a proof bundle's gate from its files, or classify a run --against a reference");
  cmd->add_option("RUN", o->run, "Evidence bundle directory")->required();
  cmd->add_option("--against", o->against, "Reference bundle: classify RUN as bitwise-equal, within-tolerance or "
                                           "divergent and report the first divergence");
  cmd->add_option("--json", o->json, "Also write the comparison as JSON to this file");
  cmd->callback([o, &result] {
    if (o->against.empty()) {
      result.exit_code = verify_bundle(o->run);
      return;
    }
    int rc = 0;
    Status st = verify_against(o->run, o->against, o->json, rc);
    result.exit_code = st.ok() ? rc : report_status(st);
  });
}

}  // namespace sp::cli
