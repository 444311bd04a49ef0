// train.gemm32 = "auto": the host's pick, cached (gemm32_auto.h).
#include "kernels/gemm32_auto.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/file_io.h"
#include "core/json_io.h"
#include "core/log.h"

namespace sp::kernels {

namespace {

constexpr const char* kFormat = "shardproof fp32 GEMM picks";

std::mutex& mu() {
  static std::mutex m;
  return m;
}
std::string& cache_path() {
  static std::string p;
  return p;
}
std::map<int, Gemm32Auto>& memo() {
  static std::map<int, Gemm32Auto> m;
  return m;
}

// An exclusive flock on `path` for the scope, waited for at most `wait_s` (a probe takes about a second; one that
// holds the lock far longer is stopped, traced or under valgrind, and nothing may hang on it); held() says whether
// it was taken. Not held when the file cannot be opened.
class FileLock {
 public:
  FileLock(const std::string& path, double wait_s) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    for (int tries = 0; fd_ >= 0; ++tries) {
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        held_ = true;
        return;
      }
      if (errno != EWOULDBLOCK && errno != EINTR) return;
      if (tries * 0.05 >= wait_s) return;
      ::usleep(50000);
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const { return held_; }

 private:
  int fd_;
  bool held_ = false;
};
double& lock_wait_seconds() {
  static double s = 60;
  return s;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "?";
}

nlohmann::json entry_of(const Gemm32Probe& p) {
  return {{"pick", gemm32_kind_name(gemm32_pick(p))},
          {"openblas_ms", p.openblas_s * 1e3},
          {"onednn_ms", p.onednn_s * 1e3},
          {"rounds", p.rounds},
          {"threads", p.threads},
          {"clock", p.cpu_time ? "thread cpu" : "wall"},
          {"measured_at", utc_now()},
          {"hostname", host_name()}};
}

// The entry's pick and measurement, or nullopt when it is not one this code wrote.
std::optional<Gemm32Auto> read_entry(const nlohmann::json& e) {
  if (!e.is_object() || !e.contains("pick") || !e["pick"].is_string()) return std::nullopt;
  auto kind = gemm32_kind_from_name(e["pick"].get<std::string>());
  if (!kind.ok() || *kind == Gemm32Kind::kAuto) return std::nullopt;
  Gemm32Auto a;
  a.kind = *kind;
  auto num = [&](const char* k) { return e.contains(k) && e[k].is_number() ? e[k].get<double>() : 0.0; };
  a.probe.openblas_s = num("openblas_ms") / 1e3;
  a.probe.onednn_s = num("onednn_ms") / 1e3;
  a.probe.rounds = static_cast<int>(num("rounds"));
  a.probe.threads = static_cast<int>(num("threads"));
  a.probe.cpu_time = e.value("clock", "") == "thread cpu";
  return a;
}

Gemm32Auto measured(int threads, std::string origin) {
  Gemm32Auto a;
  a.probe = probe_gemm32(threads);
  a.kind = gemm32_pick(a.probe);
  a.origin = std::move(origin);
  return a;
}

// Under the lock: the file's entry for this host, else a measurement written into the file.
Gemm32Auto from_cache(const std::string& file, int threads) {
  const std::string key = gemm32_host_key(threads);
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(file).parent_path(), ec);
  const FileLock lock(file + ".lock", lock_wait_seconds());
  nlohmann::json doc;
  if (path_exists(file)) {
    auto read = read_json_file(file, uint64_t{1} << 24);
    if (read.ok() && read->is_object() && read->value("format", "") == kFormat && (*read)["hosts"].is_object())
      doc = std::move(read).value();
    else
      log_warn("the fp32 GEMM pick cache '{}' is not one this version writes ({}); measuring again and replacing it",
               file, read.ok() ? "another format" : read.status().message());
  }
  if (doc.is_object() && doc["hosts"].contains(key))
    if (auto a = read_entry(doc["hosts"][key])) {
      a->origin = fmt::format("cached in {} (measured {} on {})", file, doc["hosts"][key].value("measured_at", "?"),
                              doc["hosts"][key].value("hostname", "?"));
      return *a;
    }
  if (!lock.held()) {  // another process holds the cache past any probe's time: measure, leave the file alone
    log_warn(
        "the fp32 GEMM pick cache '{}' stayed locked for {:.0f} s (another shardproof process is probing); "
        "measuring without caching",
        file, lock_wait_seconds());
    return measured(threads, fmt::format("measured now (not cached: {}.lock held by another process)", file));
  }
  Gemm32Auto a = measured(threads, "measured now, written to " + file);
  if (!doc.is_object()) doc = {{"format", kFormat}, {"version", 1}, {"hosts", nlohmann::json::object()}};
  doc["hosts"][key] = entry_of(a.probe);
  if (Status w = write_file_atomic(file, doc.dump(2) + "\n"); !w.ok()) {
    log_warn(
        "the fp32 GEMM pick could not be cached ({}): a later run measures again and may pick the other "
        "backend; pin train.gemm32 = \"{}\" to keep it",
        w.message(), gemm32_kind_name(a.kind));
    a.origin = "measured now (not cached: " + w.message() + ")";
  }
  return a;
}

}  // namespace

void set_gemm32_cache_file(std::string path) {
  const std::lock_guard<std::mutex> g(mu());
  cache_path() = std::move(path);
  memo().clear();
}

const std::string& gemm32_cache_file() { return cache_path(); }

void set_gemm32_lock_wait(double seconds) { lock_wait_seconds() = seconds; }

Result<Gemm32Auto> gemm32_auto(int threads) {
  if (threads < 1) return invalid_argument("fp32 GEMM pick for {} threads: at least one thread", threads);
  const std::lock_guard<std::mutex> g(mu());
  if (auto it = memo().find(threads); it != memo().end()) return it->second;
  const int before = blas_threads();
  Gemm32Auto a =
      cache_path().empty() ? measured(threads, "measured now (no cache file)") : from_cache(cache_path(), threads);
  set_blas_threads(before);
  memo()[threads] = a;
  return a;
}

Result<Gemm32Kind> resolve_gemm32(Gemm32Kind kind, int threads) {
  if (kind != Gemm32Kind::kAuto) return kind;
  SP_ASSIGN_OR_RETURN(const Gemm32Auto a, gemm32_auto(threads));
  return a.kind;
}

}  // namespace sp::kernels
