#include "cli/run_setup.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <utility>

#include "core/log.h"

namespace sp::cli {

namespace {

struct RootChoice {
  std::string root, origin;
};

bool has_configs(const std::filesystem::path& root) {
  std::error_code ec;
  return std::filesystem::is_directory(root / "configs", ec);
}

std::filesystem::path installed_root() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::canonical("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path().parent_path() / "share" / "shardproof";
}

// An installed root (this binary's ../share/shardproof) is the package's, read-only by intent even for root.
bool is_installed_root(const std::string& root) {
  std::error_code ec;
  const auto a = std::filesystem::weakly_canonical(root, ec);
  return !ec && !installed_root().empty() && a == std::filesystem::weakly_canonical(installed_root(), ec);
}

RootChoice choose_root() {
  if (const char* r = std::getenv("SHARDPROOF_ROOT"); r != nullptr && *r != '\0')
    return {r, std::string("$SHARDPROOF_ROOT: ") + r};
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::canonical("/proc/self/exe", ec);
  const std::filesystem::path installed = installed_root();
  if (!ec && has_configs(installed)) return {installed.string(), "installed: " + installed.string()};
  // The build tree's binary reads the source tree it was built from; a copy elsewhere never does.
  const std::string build = std::string(SP_BINARY_DIR) + "/";
  if (!ec && exe.string().rfind(build, 0) == 0) return {SP_SOURCE_DIR, std::string("source tree: ") + SP_SOURCE_DIR};
  return {installed.string(), "installed (missing: no configs/ there): " + installed.string()};
}

// $name, else $HOME/fallback, else /tmp/fallback.
std::string xdg_dir(const char* name, const char* fallback) {
  if (const char* v = std::getenv(name); v != nullptr && *v == '/') return v;
  if (const char* h = std::getenv("HOME"); h != nullptr && *h == '/') return std::string(h) + "/" + fallback;
  return std::string("/tmp/") + fallback;
}

}  // namespace

std::string default_root() { return choose_root().root; }
std::string default_root_origin() { return choose_root().origin; }

std::string default_cache_dir(const std::string& root) {
  if (!is_installed_root(root)) return root + "/.shardproof-cache";
  return user_cache_dir();
}

std::string user_cache_dir() { return xdg_dir("XDG_CACHE_HOME", ".cache") + "/shardproof"; }

std::string user_clusters_dir(const std::string& root) {
  if (!is_installed_root(root)) return root + "/configs/clusters";
  return xdg_dir("XDG_CONFIG_HOME", ".config") + "/shardproof/clusters";
}

int launched_world_size() {
  for (const char* k : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* v = std::getenv(k); v != nullptr && *v != '\0') return std::atoi(v);
  return 0;
}

bool launched_by_mpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr ||
         std::getenv("PMIX_RANK") != nullptr;
}

std::vector<std::string> relaunch_args(const CLI::App& cmd, std::vector<std::string> command) {
  for (const auto& opt : cmd.get_options()) {
    if (opt->get_name() == "--np" || opt->get_name() == "--help" || opt->count() == 0) continue;
    for (const auto& v : opt->results()) {
      command.push_back(opt->get_name());
      if (opt->get_expected_min() > 0) command.push_back(v);
    }
  }
  return command;
}

int relaunch_with_mpirun(int np, const std::vector<std::string>& args) { return run_with_mpirun(np, args, ""); }

namespace {

// The running mpirun's process group, and the first signal the launcher received (async-signal-safe
// state: the handler only reads and writes these and calls kill(2)).
volatile sig_atomic_t g_job_pgid = 0;
volatile sig_atomic_t g_job_signal = 0;
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void forward_to_job(int sig) {
  if (g_job_signal == 0) g_job_signal = sig;
  if (g_job_pgid > 0) ::kill(-g_job_pgid, sig);  // mpirun ends its ranks on SIGINT, SIGTERM and SIGHUP
}

// OpenMPI 4's mpirun keeps its session files under <orte_tmpdir_base>/ompi.<host>.<uid>, one directory
// shared by every job of the user on the host: two jobs starting and ending at once race on creating and
// removing it, and the loser exits before any rank runs ("A call to mkdir was unable to create the desired
// directory ... File exists", open-mpi/ompi#8510; seen at ctest -j 2). Each launch gets a base of its own,
// removed when the job ends (a launcher killed by SIGKILL leaves it behind, empty: mpirun removes its own
// files). The environment's own OMPI_MCA_orte_tmpdir_base wins.
class SessionBase {
 public:
  SessionBase() {
    if (std::getenv("OMPI_MCA_orte_tmpdir_base") != nullptr) return;
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp") + "/sp-mpi-XXXXXX";
    if (::mkdtemp(dir.data()) != nullptr) path_ = dir;  // else mpirun's default base, as before
  }
  SessionBase(const SessionBase&) = delete;
  SessionBase& operator=(const SessionBase&) = delete;
  ~SessionBase() { remove(); }
  const std::string& path() const { return path_; }
  void remove() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
    path_.clear();
  }

 private:
  std::string path_;
};

// run_job's body; `session` (or null) is removed before an interrupted launcher re-raises its signal.
int run_forwarding_signals(std::vector<std::string> argv, const std::string& log_path, SessionBase* session);

}  // namespace

int run_with_mpirun(int np, const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(np), "--oversubscribe", "--bind-to", "none"};
  if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
  SessionBase session;
  if (!session.path().empty()) argv.insert(argv.end(), {"--mca", "orte_tmpdir_base", session.path()});
  // The ranks launched here share this host's cores, with each other and with whatever else runs: a rank
  // waiting in MPI yields its core instead of spinning on it (OpenMPI's mpi_yield_when_idle; 27 checkpoint
  // tests at ctest -j 2 on 2 cores: 46 → 31 s). No result depends on it; the environment's own setting wins.
  if (std::getenv("OMPI_MCA_mpi_yield_when_idle") == nullptr)
    argv.insert(argv.end(), {"--mca", "mpi_yield_when_idle", "1"});
  std::error_code ec;
  argv.push_back(std::filesystem::canonical("/proc/self/exe", ec).string());
  argv.insert(argv.end(), args.begin(), args.end());
  return run_forwarding_signals(std::move(argv), log_path, &session);
}

int run_job(std::vector<std::string> argv, const std::string& log_path) {
  return run_forwarding_signals(std::move(argv), log_path, nullptr);
}

namespace {

int run_forwarding_signals(std::vector<std::string> argv, const std::string& log_path, SessionBase* session) {
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  // The forwarded signals are blocked from before the fork until the handlers know the child, so
  // none is lost; the child restores their defaults before exec.
  sigset_t forwarded, previous;
  sigemptyset(&forwarded);
  for (int sig : kForwarded) sigaddset(&forwarded, sig);
  sigprocmask(SIG_BLOCK, &forwarded, &previous);
  struct sigaction action {
  }, saved[std::size(kForwarded)];
  action.sa_handler = forward_to_job;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &action, &saved[i]);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    for (size_t i = 0; i < std::size(kForwarded); ++i) ::signal(kForwarded[i], SIG_DFL);
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    // Its own process group (so a terminal's Ctrl-C reaches it once, through the launcher), no
    // terminal input (a background group reading the terminal would be stopped), and SIGTERM when
    // the launcher dies, even by SIGKILL.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) std::_Exit(127);  // the launcher died before prctl took effect
    if (const int in = ::open("/dev/null", O_RDONLY); in >= 0) {
      ::dup2(in, 0);
      ::close(in);
    }
    if (!log_path.empty()) {
      const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        ::close(fd);
      }
    }
    ::execvp(cargv[0], cargv.data());
    std::fprintf(stderr, "shardproof: cannot run %s: %s\n", cargv[0], std::strerror(errno));
    std::_Exit(127);
  }
  if (pid > 0) {
    ::setpgid(pid, pid);  // also here: whichever of the two runs first
    g_job_pgid = pid;
  }
  sigprocmask(SIG_SETMASK, &previous, nullptr);  // a signal that arrived meanwhile is forwarded now
  int status = 0;
  if (pid > 0)
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  g_job_pgid = 0;
  for (size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &saved[i], nullptr);
  if (pid < 0) return 127;
  if (const int sig = g_job_signal; sig != 0) {
    // Interrupted: the job has ended; end this process the way the signal asked.
    log_error("interrupted by {}: {} (process group {}) and its processes were stopped", strsignal(sig), argv[0], pid);
    std::fflush(stderr);
    if (session != nullptr) session->remove();
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
}

}  // namespace

}  // namespace sp::cli
