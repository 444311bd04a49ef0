// The learning labs LSL-A … LSL-P (docs/labs.md): one per section of chapter 4 (distributed training)
// of the textbook 大规模语言模型：从理论到实践, 1st ed. A lab is data, not code: configs/labs/catalogue.toml
// (read by cli/lab_catalogue.h) gives each a run (preset + --set overrides), one catalogue fault, and
// the lines a learner reads next to the bundle. This file checks a lab's run, hands it to the proof
// protocol (cli/prove.h; nothing here trains) and renders the catalogue; a plan lab (kind = "plan") is
// checked and run by cli/plan_lab.h. Invariant, checked by
// tests/unit/labs_test.cc: every available lab's config validates at its world size (RunPlan::make) and its
// fault can act on that run; a section this engine cannot demonstrate is `available = false` with the
// reason and the closest runnable lab.
#pragma once

#include <string>
#include <vector>

#include "cli/lab_catalogue.h"
#include "cli/prove.h"
#include "config/run_config.h"
#include "core/status.h"

namespace sp::cli {

// The lab's run configuration: its preset under `root`/configs, its sets, then `extra_sets`.
Result<config::RunConfig> lab_config(const Lab& lab, const std::string& root,
                                     const std::vector<std::string>& extra_sets = {});
// Everything `lab run` checks before launching: the config loads, its world equals lab.world,
// RunPlan::make accepts it, the fault parses and can act on the run as `prove` runs stage 3
// (proof::plan_protocol, as prove plans stage 3), and a checkpoint fault targets a
// rank that writes a shard. Unavailable labs: kFailedPrecondition with the reason.
Status validate_lab(const Lab& lab, const std::string& root, const std::vector<std::string>& extra_sets = {});

struct LabRunOptions {
  std::string out{};                      // bundle directory
  std::string root{};                     // source root (configs/, data/)
  std::string cache{};                    // prepared-data cache (empty: prove's default)
  std::vector<std::string> extra_sets{};  // learner's variations, applied after the lab's sets
  bool quiet = false;
};
// The proof protocol's options for this lab (title "LSL-D §4.2.1 Data parallelism").
ProveOptions lab_prove_options(const Lab& lab, const LabRunOptions& options);

// What a lab's bundle carries about its lab (prove.json "lab"; docs/formats/gate.md): key, section, title,
// mechanism and every observation with its claims and the report view that shows it (observation_view).
nlohmann::json lab_bundle_json(const Lab& lab);
// The report view (docs/report.md §Views) an observation points to: the view of the first file it names
// (timeline → pipeline, ledger → memory, trace → traffic, checksums → curves, fault → divergence, ...),
// else the gate.
std::string observation_view(const std::string& text);

// Text for `lab list`: one line per lab (key, section, ranks, fault or "unavailable", title).
std::string lab_list_text(const LabCatalogue& catalogue);
// Text for `lab show KEY`: everything about one lab of `catalogue`, including the command that runs it,
// the catalogue's evaluation and common limits.
std::string lab_show_text(const LabCatalogue& catalogue, const Lab& lab);
// What `lab run` prints for an unavailable lab (reason and the closest runnable labs).
std::string lab_unavailable_text(const LabCatalogue& catalogue, const Lab& lab);

}  // namespace sp::cli
