// The learning labs LSL-A … LSL-P (docs/labs.md): one per section of chapter 4 (distributed training)
// of the textbook 大规模语言模型：从理论到实践, 1st ed. A lab is data, not code: configs/labs/catalogue.toml
// (read by labs/catalogue.h) gives each a run (preset + --set overrides), one catalogue fault, and
// the lines a learner reads next to the bundle. This file checks a lab's run before it starts and says what
// its bundle carries about the lab; `lab run` hands a proof lab to the proof protocol (cli/cmd_lab.cc, nothing
// here trains); a plan lab (kind = "plan") is checked and run by labs/plan_lab.h, a judge lab by
// labs/judge_lab.h. Invariant, checked by tests/unit/labs_test.cc: every available lab's config validates at its
// world size (RunPlan::make) and its fault can act on that run; a section this engine cannot demonstrate is
// `available = false` with the reason and the closest runnable lab.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/run_config.h"
#include "core/status.h"
#include "labs/catalogue.h"

namespace sp::labs {

// A lab's file (model_config, deepspeed) as `prove` is given it: relative to the repository root `root`.
std::string lab_file(const std::string& root, const std::string& file);
// The lab's run configuration: its preset under `root`/configs, its sets, then `extra_sets`.
Result<config::RunConfig> lab_config(const Lab& lab, const std::string& root,
                                     const std::vector<std::string>& extra_sets = {});
// Everything `lab run` checks before launching: the config loads, its world equals lab.world,
// RunPlan::make accepts it, the fault parses and can act on the run as `prove` runs stage 3
// (plan::plan_protocol, as prove plans stage 3), and a checkpoint fault targets a
// rank that writes a shard. Unavailable labs: kFailedPrecondition with the reason.
Status validate_lab(const Lab& lab, const std::string& root, const std::vector<std::string>& extra_sets = {});

// What a lab's bundle carries about its lab (prove.json "lab"; docs/formats/gate.md): key, section, title,
// mechanism and every observation with its claims and the report view that shows it (observation_view).
nlohmann::json lab_bundle_json(const Lab& lab);
// The report view (docs/report.md §Views) an observation points to: the view of the first file it names
// (timeline → pipeline, ledger → memory, trace → traffic, checksums → curves, fault → divergence, ...),
// else the gate.
std::string observation_view(const std::string& text);

}  // namespace sp::labs
