#include "core/check.h"

#include <cstdlib>

#include "core/log.h"

namespace sp {
namespace {
FatalHandler& handler() {
  static FatalHandler h;
  return h;
}
}  // namespace

void set_fatal_handler(FatalHandler h) { handler() = std::move(h); }

void check_failed(const char* file, int line, const char* condition, const std::string& message) {
  log_line(LogLevel::kError, fmt::format("{}:{}: check failed: {}: {}", file, line, condition, message));
  if (handler()) handler()();
  std::abort();
}

}  // namespace sp
