// `shardproof trace ...` without the rest of the CLI: the fault tests run the trace checker on the
// directory a failed job left behind, through the same registration the shardproof binary uses.
#include "cli/command.h"

namespace sp::cli {
void register_trace(CLI::App& app, CommandResult& result);  // cmd_trace.cc
}

int main(int argc, char** argv) {
  CLI::App app{"trace tool (tests)"};
  app.require_subcommand(1);
  sp::cli::CommandResult result;
  sp::cli::register_trace(app, result);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return result.exit_code;
}
