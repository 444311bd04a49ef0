#include "core/check.h"

#include <cstdlib>
#include <utility>

#include "core/log.h"

namespace sp {
namespace {
FatalHandler& handler() {
  static FatalHandler h;
  return h;
}
}  // namespace

FatalHandler& before_fatal() {
  static FatalHandler h;
  return h;
}

void set_fatal_handler(FatalHandler h) { handler() = std::move(h); }
void set_before_fatal(FatalHandler h) { before_fatal() = std::move(h); }

void check_failed(const char* file, int line, const char* condition, const std::string& message) {
  log_line(LogLevel::kError, fmt::format("{}:{}: check failed: {}: {}", file, line, condition, message));
  if (FatalHandler last = std::exchange(before_fatal(), {})) last();  // once, even if it fails a check
  if (handler()) handler()();
  std::abort();
}

}  // namespace sp
