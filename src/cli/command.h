// Subcommand registration. Each cmd_<name>.cc defines one `register_<name>(CLI::App&, CommandResult&)`
// that adds its subcommand and a callback; the callback stores its exit code in `result`.
// Exit codes (docs/cli.md): 0 success or PASS, 1 FAIL or runtime error, 2 usage or
// configuration error. The CLI is the only layer that reads argv or the environment.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "core/status.h"

namespace sp::cli {

struct CommandResult {
  int exit_code = 0;
};

// Prints `status` as "shardproof: error: ...\n  hint: ..." on stderr (rank 0 only when `all_ranks`
// is false) and returns its exit code.
int report_status(const Status& status, bool all_ranks = true);

void register_train(CLI::App& app, CommandResult& result);
void register_grads(CLI::App& app, CommandResult& result);
void register_data(CLI::App& app, CommandResult& result);
void register_verify(CLI::App& app, CommandResult& result);
void register_trace(CLI::App& app, CommandResult& result);
void register_ckpt(CLI::App& app, CommandResult& result);
void register_prove(CLI::App& app, CommandResult& result);
void register_compare(CLI::App& app, CommandResult& result);
void register_lab(CLI::App& app, CommandResult& result);
void register_activations(CLI::App& app, CommandResult& result);
void register_plan(CLI::App& app, CommandResult& result);
void register_report(CLI::App& app, CommandResult& result);
void register_config(CLI::App& app, CommandResult& result);
void register_judge(CLI::App& app, CommandResult& result);

}  // namespace sp::cli
