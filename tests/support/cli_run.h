// Shared test helper: one subcommand through its real CLI11 wiring, as src/cli/main.cc runs it.
// Not a CLI mock: the register_<name> function under test adds its subcommand to a fresh app and the
// callback runs for real. Invariant: the exit code is main.cc's (0 for --help, 2 for a parse error,
// else the subcommand's). Reference: docs/cli.md (exit codes).
#pragma once

#include <string>

#include "cli/command.h"

namespace sp::test {

// `line` without the program name, e.g. "data verify DIR"; words are split at spaces (no quoting).
inline int run_command(void (*register_fn)(CLI::App&, cli::CommandResult&), const std::string& line) {
  CLI::App app{"shardproof"};
  app.require_subcommand(1);
  cli::CommandResult result;
  register_fn(app, result);
  try {
    app.parse(line, /*program_name_included=*/false);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return result.exit_code;
}

}  // namespace sp::test
