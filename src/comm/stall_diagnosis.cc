#include "comm/stall_diagnosis.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "comm/topology.h"
#include "core/json_io.h"
#include "core/machine.h"
#include "core/timer.h"

namespace sp::comm {
namespace {

constexpr int64_t kTailBytes = int64_t{1} << 18;  // the last 256 KiB of a trace hold a group's recent ops

// What one member's trace says about seq `seq` of `group`.
struct Seen {
  bool readable = false;
  bool reached = false;   // a completed (or aborted) record of seq ≥ N
  bool waiting = false;   // its watchdog's timed_out record of seq N
  int64_t last_seq = -1;  // its last record of the group
  int64_t last_step = -1;
  std::string last_phase;
};

Seen read_member(const std::string& path, const std::string& group, int64_t seq) {
  Seen s;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return s;
  s.readable = true;
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    const int64_t from = std::max<int64_t>(0, st.st_size - kTailBytes);
    text.resize(static_cast<size_t>(st.st_size - from));
    const ssize_t n = ::pread(fd, text.data(), text.size(), from);
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
    if (from > 0) text.erase(0, text.find('\n') == std::string::npos ? text.size() : text.find('\n') + 1);
  }
  ::close(fd);
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) break;  // a line still being written
    const nlohmann::json j = nlohmann::json::parse(text.substr(pos, eol - pos), nullptr, false);
    pos = eol + 1;
    if (!j.is_object() || j.value("group", std::string()) != group || !j.contains("seq") ||
        !j["seq"].is_number_integer())
      continue;
    const int64_t q = j["seq"].get<int64_t>();
    s.last_seq = q;
    s.last_step = j.value("step", int64_t{-1});
    s.last_phase = j.value("phase", std::string());
    if (q == seq && j.value("timed_out", false))
      s.waiting = true;
    else if (q >= seq)
      s.reached = true;
  }
  return s;
}

struct Process {
  long pid = -1;
  bool here = false;  // on this host: its state can be read
};

std::map<int, Process> processes_of(const std::string& run_dir) {
  std::map<int, Process> out;
  auto topology = read_json_file(run_dir + "/" + std::string(kTopologyFileName), 1 << 26);
  if (!topology.ok() || !topology->contains("ranks") || !(*topology)["ranks"].is_array()) return out;
  const std::string host = host_name();
  for (const nlohmann::json& r : (*topology)["ranks"]) {
    if (!r.is_object() || !r.contains("world_rank") || !r["world_rank"].is_number_integer()) continue;
    Process p;
    p.pid = r.value("pid", -1L);
    p.here = r.value("host", std::string()) == host;
    out[r["world_rank"].get<int>()] = p;
  }
  return out;
}

std::string describe_state(char state) {
  switch (state) {
    case '\0':
      return "has ended";
    case 'Z':
      return "has ended (a zombie)";
    case 'T':
    case 't':
      return "is stopped (state T: SIGSTOP, Ctrl-Z or a debugger)";
    case 'D':
      return "is blocked in the kernel (state D: I/O)";
    default:
      return fmt::format("is running (state {}) but has not arrived", state);
  }
}

bool decided(char state) { return state == '\0' || state == 'Z' || state == 'T' || state == 't'; }

}  // namespace

char process_state(long pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat;
  if (!in || !std::getline(in, stat)) return '\0';
  const size_t paren = stat.rfind(')');  // "pid (comm) S ...": comm may hold spaces and parentheses
  return paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : '\0';
}

std::string diagnose_stall(const std::string& run_dir, const TraceRecord& pending, std::span<const int> members,
                           int self, double grace_s) {
  const std::map<int, Process> procs = processes_of(run_dir);
  std::map<int, Seen> seen;
  std::map<int, char> states;
  const int64_t deadline = now_ns() + static_cast<int64_t>(grace_s * 1e9);
  for (;;) {
    bool all = true;
    for (int m : members) {
      if (m == self) continue;
      seen[m] = read_member(trace_file_path(run_dir, m), pending.group, pending.seq);
      const auto p = procs.find(m);
      if (p != procs.end() && p->second.here) states[m] = process_state(p->second.pid);
      all = all && (seen[m].reached || seen[m].waiting || (states.count(m) && decided(states[m])));
    }
    if (all || now_ns() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::vector<int> waiting = {self}, passed, behind, unreadable;
  std::string lines;
  for (int m : members) {
    if (m == self) continue;
    const Seen& s = seen[m];
    if (!s.readable) {
      unreadable.push_back(m);
      continue;
    }
    if (s.waiting) waiting.push_back(m);
    if (s.reached && !s.waiting) passed.push_back(m);
    if (s.reached || s.waiting) continue;
    behind.push_back(m);
    lines += fmt::format("\n  world rank {}: its trace ends at seq {} of '{}' (step {}, phase {})", m, s.last_seq,
                         pending.group, s.last_step, s.last_phase.empty() ? "-" : s.last_phase);
    const auto p = procs.find(m);
    if (states.count(m))
      lines += fmt::format("; its process {} on this host {}", p->second.pid, describe_state(states[m]));
    else if (p != procs.end())
      lines += fmt::format("; its process {} is on another host", p->second.pid);
  }
  std::string out;
  if (!behind.empty())
    out = fmt::format("watchdog: world rank{} {} never reached seq {} of group '{}', where world rank{} {} waited:{}",
                      behind.size() == 1 ? "" : "s", fmt::join(behind, ", "), pending.seq, pending.group,
                      waiting.size() == 1 ? "" : "s", fmt::join(waiting, ", "), lines);
  else if (unreadable.empty() && waiting.size() == 1 && !passed.empty())
    out = fmt::format(
        "watchdog: every other member of '{}' completed seq {}: this process itself was held up in it "
        "(stopped, swapped out or starved of CPU), not a peer",
        pending.group, pending.seq);
  else if (unreadable.empty())
    out = fmt::format(
        "watchdog: every member of '{}' reached seq {} or waits in it: the collective itself is stuck "
        "(an MPI or network failure), not a member",
        pending.group, pending.seq);
  if (!unreadable.empty())
    out += fmt::format(
        "{}watchdog: the traces of world rank{} {} are not readable here ({}): without a shared file "
        "system each host sees only its own ranks' files; collect every rank's trace/ into one run "
        "directory and run `shardproof trace check DIR` to name the rank that stopped",
        out.empty() ? "" : "\n", unreadable.size() == 1 ? "" : "s", fmt::join(unreadable, ", "),
        trace_file_path(run_dir, unreadable.front()));
  return out;
}

}  // namespace sp::comm
