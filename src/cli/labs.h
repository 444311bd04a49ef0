// The learning labs LSL-A … LSL-O (docs/labs.md): one per section of chapter 4 (distributed training)
// of the textbook 大规模语言模型：从理论到实践, 1st ed. A lab is data, not code: a run (preset + --set
// overrides), one catalogue fault, and the lines a learner reads next to the bundle: what to observe
// and what the result cannot be extrapolated to. `lab run` hands the run to the proof protocol
// (cli/prove.h); nothing here trains. Invariant, checked by tests/unit/labs_test.cc: every available
// lab's config validates at its world size (Plan::make) and its fault can act on that run; a section
// this engine cannot demonstrate is `available = false` with the reason and the closest runnable lab.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/prove.h"
#include "core/status.h"
#include "parallel/run_config.h"

namespace sp::cli {

// Every member has a default initializer so that catalogue entries name only what they use.
struct Lab {
  std::string key{};        // "LSL-D"
  std::string section{};    // "4.2.1"
  std::string title{};      // "Data parallelism"
  std::string mechanism{};  // what the section teaches and how this run shows it (one paragraph)
  std::string preset = "tiny";
  std::vector<std::string> sets{};                // --set overrides, in order, applied to the preset
  int world = 0;                                  // ranks: dp·tp·pp of the run (0 when unavailable)
  std::string fault{};                            // catalogue fault NAME@step:rank (empty when unavailable)
  std::vector<std::string> observe{};             // which evidence to read and what it shows
  std::vector<std::string> cannot_extrapolate{};  // lab-specific limits (lab_common_limits() hold for all)
  bool available = true;
  std::string unavailable_reason{};    // why the section cannot be demonstrated here
  std::vector<std::string> closest{};  // unavailable labs: the runnable labs nearest to the section
};

// Every lab, in key order A … O.
const std::vector<Lab>& lab_catalogue();
// Limits that hold for every lab (CPU ranks on one host, the tiny model, fp32, few steps).
const std::vector<std::string>& lab_common_limits();
// The independent evaluation every lab's gate applies (the held-out criterion).
std::string_view lab_evaluation();

// "LSL-D", "lsl-d" or "D". Unknown keys: kNotFound listing every key.
Result<const Lab*> find_lab(std::string_view key);

// The lab's run configuration: its preset under `root`/configs, its sets, then `extra_sets`.
Result<parallel::RunConfig> lab_config(const Lab& lab, const std::string& root,
                                       const std::vector<std::string>& extra_sets = {});
// Everything `lab run` checks before launching: the config loads, its world equals lab.world,
// Plan::make accepts it, the fault parses and can act on the run as `prove` runs stage 3
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

// Text for `lab list`: one line per lab (key, section, ranks, fault or "unavailable", title).
std::string lab_list_text();
// Text for `lab show KEY`: everything about one lab, including the command that runs it.
std::string lab_show_text(const Lab& lab);
// What `lab run` prints for an unavailable lab (reason and the closest runnable labs).
std::string lab_unavailable_text(const Lab& lab);

}  // namespace sp::cli
