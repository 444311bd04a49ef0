// `shardproof verify RUN --against REF`: classify a run against a reference from their evidence
// files alone (bitwise-equal / within-tolerance / divergent) and report the first divergence; exit 0 when
// every step holds its promise, 1 when one does not, 3 when the steps judged hold but not every step could
// be judged (the verdict never covers a step that was not verified).
// `shardproof verify BUNDLE`: re-derive a proof bundle's gate from its files (proof/gate.h) for a
// third party, and compare it with the gate.json the bundle carries.
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "cli/prove.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "core/log.h"
#include "evidence/bundle_paths.h"
#include "evidence/compare.h"
#include "proof/equivalence.h"
#include "proof/gate.h"
#include "proof/seal.h"
#include "report/render.h"

namespace sp::cli {

static Status verify_against(const std::string& run, const std::string& ref, const std::string& json_out, int& rc) {
  SP_ASSIGN_OR_RETURN(const proof::RunEquivalence e,
                      proof::compare_runs(evidence::RunPaths(run), evidence::RunPaths(ref)));
  const evidence::Comparison& c = e.comparison;
  std::string text = fmt::format("{} vs {}: {}\n", run, ref, e.describe());
  text += fmt::format(
      "  promised by the contract: {}{}\n", evidence::equivalence_name(c.promised),
      e.anchored ? fmt::format(" (anchored replay: {} steps, each from the reference's state)", e.judged_steps) : "");
  const int64_t unverified = e.unverified_steps();
  text += fmt::format(
      "  steps verified: {} of {}{}\n", e.steps - unverified, e.steps,
      unverified > 0 && e.holds() ? fmt::format(" — verdict: UNVERIFIED for {} step(s) (exit 3)", unverified) : "");
  for (const std::string& p : c.problems) text += "  PROBLEM: " + p + "\n";
  if (c.problem_count > static_cast<int64_t>(c.problems.size()))
    text += fmt::format("  ... and {} more problems\n", c.problem_count - static_cast<int64_t>(c.problems.size()));
  if (!c.first_mismatch.empty()) text += "  first mismatch:   " + c.first_mismatch[0].to_string() + "\n";
  if (!c.divergence.empty()) {
    text += "  FIRST DIVERGENCE: " + c.divergence[0].to_string() + "\n  propagation:";
    for (const auto& [s, n] : c.divergent_per_step) text += fmt::format(" step {}: {} records;", s, n);
    text += "\n";
  }
  std::fputs(text.c_str(), stdout);
  if (!json_out.empty()) {
    nlohmann::json j = c.to_json();
    j["anchored"] = e.anchored;
    j["judged_steps"] = e.judged_steps;
    j["steps"] = e.steps;
    j["unverified_steps"] = unverified;
    j["same_topology"] = e.same_topology;
    j["summary"] = e.describe();
    SP_RETURN_IF_ERROR(write_file_atomic(json_out, j.dump(2) + "\n"));
  }
  // 0: every step holds its promise; 1: a step does not (or the records are incomplete); 3: the judged
  // steps hold but others were not verified (a free-running non-bitwise run: only step 0 is comparable).
  rc = !e.holds() ? 1 : unverified > 0 ? 3 : 0;
  return Status();
}

// Exit 0 PASS, 1 FAIL (naming the criterion and the file), 2 not a bundle.
static int verify_bundle(const std::string& dir, const std::string& key) {
  std::error_code ec;
  const evidence::ProofPaths paths(dir);
  if (!std::filesystem::exists(paths.prove(), ec))
    return report_status(
        invalid_argument("'{}' is not a proof bundle (no prove.json)", dir)
            .with_hint("verify a `shardproof prove` bundle, or compare runs: verify RUN --against REF"));
  auto verdict = proof::derive_gate(dir);
  if (!verdict.ok()) {
    std::printf("verdict: FAIL: %s\n", verdict.status().message().c_str());
    return 1;
  }
  print_verdict(*verdict, dir);
  // The bundle's derived files (gate.json, summary.md, first_divergence.json, drift.json, report.html)
  // must say exactly what its sealed files say.
  int edited = 0;
  for (const auto& [file, text] : proof::derived_files(*verdict)) {
    auto stored = read_file(paths.file(file), uint64_t{1} << 28);
    if (stored.ok() && *stored == text) continue;
    std::printf("%s: %s\n", file.c_str(),
                stored.ok() ? "differs from what the bundle's sealed files say (edited after the proof?)"
                            : stored.status().message().c_str());
    ++edited;
  }
  // The signature, against the key the caller trusts (a seal alone can be recomputed by anyone).
  bool signature_ok = true;
  if (!key.empty()) {
    const Status s = proof::check_signature(dir, key);
    signature_ok = s.ok();
    std::printf("signature: %s\n", s.ok() ? fmt::format("bundle.sha256 is signed by the key in {}", key).c_str()
                                          : fmt::format("FAIL: {}", s.message()).c_str());
  }
  // report.html is derived too (docs/report.md): when present, it must show exactly the bundle's data.
  if (path_exists(paths.file(evidence::kReportFile)))
    if (Status s = report::check_report(dir); !s.ok()) {
      std::printf("%s: does not show this bundle: %s\n  hint: %s\n", std::string(evidence::kReportFile).c_str(),
                  s.message().c_str(), s.hint().c_str());
      ++edited;
    }
  if (edited > 0) {
    std::printf("verdict: FAIL: %d derived file(s) do not match the evidence; trust the lines above, not them\n",
                edited);
    return 1;
  }
  if (!signature_ok) {
    std::printf("verdict: FAIL: the bundle is not signed by the key you trust\n");
    return 1;
  }
  return verdict->gate.passed() ? 0 : 1;
}

void register_verify(CLI::App& app, CommandResult& result) {
  struct Opts {
    std::string run, against, json, key;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Re-derive a proof bundle's gate from its files, or classify a run --against a reference");
  cmd->add_option("RUN", o->run, "Evidence bundle directory")->required();
  cmd->add_option("--against", o->against,
                  "Reference run: check RUN against it in the class its contract promises (bitwise, or within the "
                  "single-step tolerances at every anchored step) and report the first divergence");
  cmd->add_option("--json", o->json, "Also write the comparison as JSON to this file");
  cmd->add_option("--key", o->key,
                  "Ed25519 public key (PEM): the bundle's seal must carry its signature (prove --sign)");
  cmd->callback([o, &result] {
    if (o->against.empty()) {
      result.exit_code = verify_bundle(o->run, o->key);
      return;
    }
    int rc = 0;
    Status st = verify_against(o->run, o->against, o->json, rc);
    result.exit_code = st.ok() ? rc : report_status(st);
  });
}

}  // namespace sp::cli
