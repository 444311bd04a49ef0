#include <cstdio>

#include "cli/command.h"
#include "core/log.h"

namespace sp::cli {

int report_status(const Status& status, bool all_ranks) {
  if (status.ok()) return 0;
  std::string text = "shardproof: error: " + status.message();
  if (!status.hint().empty()) text += "\n  hint: " + status.hint();
  log_line(LogLevel::kQuiet, text);
  return status.exit_code();
}

}  // namespace sp::cli
