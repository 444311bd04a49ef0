#include "cli/run_setup.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/log.h"

namespace sp::cli {

std::string default_root() {
  if (const char* r = std::getenv("SHARDPROOF_ROOT"); r != nullptr && *r != '\0') return r;
  return SP_SOURCE_DIR;
}

Result<parallel::RunConfig> load_run_config(const std::string& root, const std::string& preset,
                                            const std::string& config_file, const std::vector<std::string>& sets) {
  nlohmann::json j;
  if (!preset.empty() && !config_file.empty())
    return invalid_argument("--preset and --config are mutually exclusive").with_hint("pass one of them");
  if (!config_file.empty()) {
    SP_ASSIGN_OR_RETURN(j, parallel::read_toml(config_file));
  } else {
    SP_ASSIGN_OR_RETURN(j, parallel::read_preset(root + "/configs", preset.empty() ? "tiny" : preset));
  }
  for (const std::string& s : sets) SP_RETURN_IF_ERROR(parallel::apply_override(j, s));
  return parallel::RunConfig::from_json(j);
}

Status check_input_file(std::string_view flag, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return invalid_argument("{} '{}': no such file", flag, path).with_hint("check the path");
  if (!std::filesystem::is_regular_file(path, ec))
    return invalid_argument("{} '{}' is not a regular file", flag, path).with_hint("check the path");
  return Status();
}

bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

int relaunch_with_mpirun(int np, const std::vector<std::string>& args) { return run_with_mpirun(np, args, ""); }

int run_with_mpirun(int np, const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(np), "--oversubscribe", "--bind-to", "none"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  std::error_code ec;
  argv.push_back(std::filesystem::canonical("/proc/self/exe", ec).string());
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    if (!log_path.empty()) {
      const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
    }
    ::execvp("mpirun", cargv.data());
    std::perror("shardproof: cannot run mpirun");
    std::_Exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

}  // namespace sp::cli
