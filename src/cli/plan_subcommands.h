// `shardproof plan`'s subcommands, registered under the `plan` command by cmd_plan.cc (docs/plan.md):
//   plan calibrate [--np N] [--out FILE] [--quick]   measures this machine into configs/clusters/this-host.toml
//   plan list                                        cluster presets and named model shapes
//   plan published [--table FILE] [--efficiency E] [--json]
//       every row of a published throughput table planned from the configuration it states, its predicted
//       step time and TFLOP/s next to the published ones (planner/published_prediction.h)
// Exit codes as `plan`: 0 success, 2 usage or configuration error, 1 runtime error.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/command.h"
#include "core/status.h"
#include "planner/cluster.h"

namespace sp::cli {

// A cluster by preset name or path: a name is looked up first in the user's clusters (run_setup.h
// user_clusters_dir: where `plan calibrate` writes this-host.toml), then in `root`/configs/clusters.
Result<planner::ClusterSpec> load_cluster_for(const std::string& root, const std::string& name_or_path);

void register_plan_subcommands(CLI::App* plan, CommandResult& result);

}  // namespace sp::cli
