#include "comm/trace_context.h"

#include <array>

namespace sp::comm {
namespace {
constexpr std::array<std::string_view, 11> kPhaseNames = {
    "setup", "forward",  "backward", "grad_sync", "optimizer", "checkpoint",
    "eval",  "evidence", "push",     "pull",      "unknown",
};
}  // namespace

std::string_view phase_name(Phase phase) { return kPhaseNames[static_cast<size_t>(phase)]; }

std::optional<Phase> phase_from_name(std::string_view name) {
  for (size_t i = 0; i < kPhaseNames.size(); ++i)
    if (kPhaseNames[i] == name) return static_cast<Phase>(i);
  return std::nullopt;
}

}  // namespace sp::comm
