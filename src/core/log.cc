#include "core/log.h"

#include <cstdio>
#include <mutex>

namespace sp {
namespace {
std::mutex g_mu;
std::string g_prefix;
LogLevel g_level = LogLevel::kInfo;
}  // namespace

void set_log_rank(int rank, std::string coords) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_prefix = coords.empty() ? fmt::format("[r{}]", rank) : fmt::format("[r{} {}]", rank, coords);
}

void set_log_level(LogLevel level) { g_level = level; }
LogLevel log_level() { return g_level; }

std::string log_prefix() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_prefix;
}

void log_line(LogLevel level, std::string_view text) {
  // Info and quiet lines carry no tag; the others say their level ("warn: ...").
  static const char* kTag[] = {"debug", "", "warn", "error", ""};
  std::lock_guard<std::mutex> lock(g_mu);
  std::string line = g_prefix.empty() ? "" : g_prefix + " ";
  if (const char* tag = kTag[static_cast<int>(level)]; *tag != '\0') line += fmt::format("{}: ", tag);
  line.append(text);
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace sp
