// `shardproof activations compare RUN --against REF [--tolerance X] [--json FILE]`: the per-layer
// activation trace view. Single-process, no MPI: reads both runs' activations/rank-*.jsonl.
// Exit 0 when every record the run wrote matches the reference (bitwise by default; relative L2
// within X with --tolerance), 1 with the first difference in forward order, 2 on usage errors
// (no such directory, a run that recorded no activations). Reference: docs/formats/activations.md.
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/file_io.h"
#include "evidence/activations.h"

namespace sp::cli {
namespace {
struct ActivationsOptions {
  std::string run;
  std::string ref;
  double tolerance = -1;  // < 0: bitwise
  std::string json_out;
};
}  // namespace

void register_activations(CLI::App& app, CommandResult& result) {
  auto opts = std::make_shared<ActivationsOptions>();
  CLI::App* act = app.add_subcommand("activations", "the per-layer activation trace (evidence.activation_digests)");
  act->require_subcommand(1);
  CLI::App* compare =
      act->add_subcommand("compare",
                          "compare a run's activation digests with a reference run's (exit 0 equal, 1 with the first "
                          "difference in forward order)");
  compare->add_option("run", opts->run, "run directory holding activations/rank-NNNNN.jsonl")->required();
  compare->add_option("--against", opts->ref, "reference run directory (e.g. the single-device run)")->required();
  compare
      ->add_option("--tolerance", opts->tolerance,
                   "relative L2 tolerance per record instead of bitwise digests (tensor-parallel runs)")
      ->check(CLI::NonNegativeNumber);
  compare->add_option("--json", opts->json_out, "also write the comparison as JSON to this file");
  compare->callback([opts, &result] {
    for (const std::string* dir : {&opts->run, &opts->ref})
      if (!path_exists(*dir)) {
        result.exit_code = report_status(invalid_argument("run directory '{}' does not exist", *dir));
        return;
      }
    const bool bitwise = opts->tolerance < 0;
    auto cmp = evidence::compare_activations(opts->run, opts->ref, bitwise, bitwise ? 0.0 : opts->tolerance);
    if (!cmp.ok()) {
      result.exit_code = report_status(cmp.status());
      return;
    }
    if (!cmp->recorded || !cmp->reference_recorded) {
      result.exit_code =
          report_status(invalid_argument("'{}' recorded no activations", cmp->recorded ? opts->ref : opts->run)
                            .with_hint("train it with --set evidence.activation_digests=true"));
      return;
    }
    const std::string text = cmp->summary();
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    if (!opts->json_out.empty())
      if (Status s = write_file_atomic(opts->json_out, cmp->to_json().dump(2) + "\n"); !s.ok()) {
        result.exit_code = report_status(s);
        return;
      }
    result.exit_code = cmp->equal() ? 0 : 1;
  });
}

}  // namespace sp::cli
