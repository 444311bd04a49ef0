// Chrome trace export: turns DIR/trace/rank-*.jsonl into one Chrome trace-event JSON file that
// chrome://tracing and ui.perfetto.dev open. It draws; it does not judge (trace_check.h does).
// Layout: one process per world rank (pid = world rank, named "rank N (dp..tp..pp..)" from
// topology.json), one thread per group (tid = the group's index in the sorted list of all groups,
// so a group has the same tid on every rank), one "X" complete event per record with ts relative
// to the earliest record. Reference: docs/formats/trace.md §"Chrome export".
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "evidence/trace_check.h"

namespace sp::evidence {

// `topology` may be null (processes are then named "rank N").
nlohmann::json chrome_trace_from(const std::vector<RankTrace>& ranks, const nlohmann::json* topology);

// Reads DIR (torn last lines tolerated; a corrupt file is an error naming it) and builds the trace.
Result<nlohmann::json> chrome_trace(const std::string& dir);

// chrome_trace(dir) written atomically to `out_path`.
Status write_chrome_trace(const std::string& dir, const std::string& out_path);

}  // namespace sp::evidence
