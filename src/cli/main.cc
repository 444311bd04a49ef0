// shardproof: the command-line entry point. Parses argv, dispatches to one subcommand.
#include <cstdio>

#include "cli/command.h"
#include "cli/run_setup.h"
#include "core/revision.h"

int main(int argc, char** argv) {
  CLI::App app{
      "shardproof: train LLaMA-style models across MPI ranks and prove each parallel strategy "
      "computes the same training as one device"};
  app.require_subcommand(1);
  // The version, and where configs/ and data/ come from (an installed binary: ../share/shardproof).
  app.set_version_flag("--version",
                       std::string("shardproof ") + sp::git_revision() + "\ndata: " + sp::cli::default_root_origin());
  sp::cli::CommandResult result;
  sp::cli::register_train(app, result);
  sp::cli::register_grads(app, result);
  sp::cli::register_data(app, result);
  sp::cli::register_verify(app, result);
  sp::cli::register_trace(app, result);
  sp::cli::register_ckpt(app, result);
  sp::cli::register_prove(app, result);
  sp::cli::register_compare(app, result);
  sp::cli::register_lab(app, result);
  sp::cli::register_activations(app, result);
  sp::cli::register_plan(app, result);
  sp::cli::register_report(app, result);
  sp::cli::register_config(app, result);
  sp::cli::register_judge(app, result);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return result.exit_code;
}
