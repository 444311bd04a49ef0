// Logging with a rank prefix: every line says which process wrote it ("[r2 dp1.tp0.pp0] ...").
// The prefix is process context, not topology: comm/ sets it once the grid is known, and no layer
// reads it back to make decisions. Messages go to stderr; progress lines go through `log_progress`.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <utility>

namespace sp {

// A line is "<prefix> <tag>: text" for debug, warn and error, "<prefix> text" for info and quiet;
// quiet lines are printed whatever the level (the CLI's "shardproof: error: ..." report).
enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kQuiet = 4 };

void set_log_rank(int rank, std::string coords = {});
void set_log_level(LogLevel level);
LogLevel log_level();
// "[r3 dp1.tp1.pp0]" or "[r0]" or "" before MPI is up.
std::string log_prefix();
void log_line(LogLevel level, std::string_view text);

template <typename... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kDebug) log_line(LogLevel::kDebug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kInfo) log_line(LogLevel::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kWarn) log_line(LogLevel::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_error(fmt::format_string<Args...> f, Args&&... args) {
  log_line(LogLevel::kError, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace sp
