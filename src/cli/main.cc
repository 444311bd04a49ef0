// shardproof: the command-line entry point. Parses argv, dispatches to one subcommand.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/blas_select.h"
#include "cli/command.h"
#include "cli/run_setup.h"
#include "core/revision.h"
#include "kernels/gemm32_auto.h"

namespace {

// Edits (insert, delete, substitute, swap two neighbours) between a and b: how close a typo is to a command.
size_t typo_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

// A first argument that is neither an option nor a command: named, with the nearest command (exit 2).
bool refuse_unknown_command(CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  const std::string word = argv[1];
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(sub->get_name());
  if (std::find(names.begin(), names.end(), word) != names.end()) return false;
  std::string nearest = names.front();
  for (const std::string& n : names)
    if (typo_distance(word, n) < typo_distance(word, nearest)) nearest = n;
  std::string all;
  for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
  std::fprintf(stderr, "shardproof: error: unknown command '%s'\n  hint: %scommands: %s (shardproof --help)\n",
               word.c_str(),
               typo_distance(word, nearest) <= std::max<size_t>(2, nearest.size() / 3)
                   ? ("did you mean '" + nearest + "'? ").c_str()
                   : "",
               all.c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  sp::cli::select_blas_core(argv);  // first: it may re-execute this process before MPI or BLAS start
  // Where train.gemm32 = "auto" keeps this host's pick (kernels/gemm32_auto.h; nothing is measured until a run
  // needs it).
  sp::kernels::set_gemm32_cache_file(sp::cli::user_cache_dir() + "/gemm32.json");
  CLI::App app{
      "shardproof: train LLaMA-style models across MPI ranks and prove each parallel strategy "
      "computes the same training as one device"};
  app.require_subcommand(1);
  // The version, where configs/ and data/ come from (an installed binary: ../share/shardproof), and the
  // OpenBLAS core that runs (it changes fp32 bits; the contract's engine.blas names it too).
  app.set_version_flag("--version",
                       std::string("shardproof ") + sp::git_revision() + "\ndata: " + sp::cli::default_root_origin() +
                           "\nblas core: " + sp::cli::blas_core_origin() +
                           "\nfp32 GEMM pick (train.gemm32 = \"auto\"): " + sp::kernels::gemm32_cache_file());
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
  if (refuse_unknown_command(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  return result.exit_code;
}
