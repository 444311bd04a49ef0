// Shared CLI plumbing for commands that run the engine: the source root (configs/, data/), config
// loading (--preset / --config / --set), and relaunching under mpirun for --np.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "config/run_sources.h"
#include "core/status.h"

namespace sp::cli {

// The root that holds configs/ and data/ (presets, the bundled corpus, cluster presets, the published
// tables), when a command's --root does not name one (docs/install.md):
//   1. $SHARDPROOF_ROOT;
//   2. <directory of this binary>/../share/shardproof, when it holds configs/: an installed binary
//      (`cmake --install`, `make install`, the .deb) finds its data relative to itself;
//   3. the source tree this binary was built from, only while the binary runs from its build tree;
//   4. else (2) anyway, so that every error names the place an installed binary looks in.
std::string default_root();
// What default_root() resolved and why ("installed: /usr/bin/../share/shardproof"), for --version and
// error hints.
std::string default_root_origin();
// Where a run's prepared-data cache goes without --cache: `root`/.shardproof-cache when `root` is writable
// (a source tree), else $XDG_CACHE_HOME/shardproof (default ~/.cache/shardproof): an installed root is
// read-only.
std::string default_cache_dir(const std::string& root);
// $XDG_CACHE_HOME/shardproof (default ~/.cache/shardproof): what is kept per user and host, whatever the root
// (the fp32 GEMM pick, kernels/gemm32_auto.h).
std::string user_cache_dir();
// Where `plan calibrate` writes this-host.toml and where `plan` looks first for cluster files: the root's
// configs/clusters when writable, else $XDG_CONFIG_HOME/shardproof/clusters (default
// ~/.config/shardproof/clusters).
std::string user_clusters_dir(const std::string& root);
// The launcher's world size (OMPI_COMM_WORLD_SIZE or PMI_SIZE) under mpirun/srun, else 0.
int launched_world_size();
// True when this process was started by mpirun/srun (one rank of a job).
bool launched_by_mpi();
// `command` ("train", or "plan", "calibrate") followed by every option given to `cmd` as it was given,
// but --np and --help: the arguments of the same command relaunched under mpirun.
std::vector<std::string> relaunch_args(const CLI::App& cmd, std::vector<std::string> command);
// Re-executes this binary under `mpirun -np N` with `args` (argv without --np), returns its exit code.
int relaunch_with_mpirun(int np, const std::vector<std::string>& args);
// The same with stdout and stderr written to `log_path` (empty: inherited). A job that ended on a
// signal returns 128 + the signal number. mpirun runs in its own process group without terminal
// input; SIGINT, SIGTERM and SIGHUP sent to this process are forwarded to that group (mpirun then
// ends its ranks), and after the job has ended this process dies of the same signal. If this process
// is killed outright (SIGKILL), mpirun receives SIGTERM (PR_SET_PDEATHSIG).
int run_with_mpirun(int np, const std::vector<std::string>& args, const std::string& log_path);
// The same for any command: `argv[0]` (looked up on PATH) with its arguments, run as that job is run (its own
// process group, signals forwarded, stdout and stderr to `log_path` or inherited). 127 when it cannot start.
int run_job(std::vector<std::string> argv, const std::string& log_path);

}  // namespace sp::cli
