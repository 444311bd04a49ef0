// Trace checker: proves from the files alone that every member of every group issued the same
// sequence of collectives, that every send met its receive, and sums the traffic. It reads
// DIR/trace/rank-NNNNN.jsonl (written by comm/TracedCommunicator) and DIR/topology.json.
// It does not re-run anything and does not judge whether the traffic is the predicted one (the gate
// compares TraceReport::traffic with the ledger model's prediction).
// Checks: missing or extra rank files; torn last line (a warning: a crash may leave one); corrupt
// records; seq gaps and duplicates per rank and group; group size and members against each other
// and the topology; collectives compared position by position (op, dtype, reduce, root, count,
// counts, then step and phase; all_to_all send/recv count matrix); payload digests that
// must agree (broadcast, all_gather, p2p); p2p pairing per (sender, receiver, tag) in order;
// ops the watchdog marked timed_out. Reference: docs/formats/trace.md §"Checking".
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "comm/trace_context.h"
#include "comm/trace_record.h"
#include "core/status.h"

namespace sp::evidence {

// One problem. `message` is a complete sentence naming everything below.
struct TraceMismatch {
  // missing_rank_file, extra_rank_file, corrupt_record, topology, seq_gap, seq_duplicate, members,
  // missing_op (a member issued fewer collectives), field (a compared field differs), payload
  // (digests that must agree do not), p2p_unmatched, p2p_field, timed_out.
  std::string kind = {};
  std::string group = {};       // empty for file-level problems
  int64_t seq = -1;             // seq of the op on the first rank in `ranks` (−1: not about one op)
  std::vector<int> ranks = {};  // world ranks involved
  std::string field = {};       // for field / p2p_field / payload
  std::string expected = {};    // the majority (or first) value and its ranks, e.g. "1024 on ranks 0, 2, 3"
  std::string actual = {};      // the differing value and its ranks, e.g. "2048 on rank 1"
  std::string message = {};
  int64_t t_us = 0;   // earliest start time of the records involved (orders "first")
  int64_t step = -1;  // the step and phase of the op, where one record is named
  std::string phase = {};
};

struct TrafficKey {
  std::string group = {};
  int64_t step = -1;
  comm::Phase phase = comm::Phase::kSetup;
  auto operator<=>(const TrafficKey&) const = default;
};

// Sums over every completed record of every member rank (not per rank: divide by the group size
// for a per-rank figure when all members carry the same payload).
struct Traffic {
  int64_t ops = 0;
  int64_t bytes = 0;
  int64_t wire_bytes = 0;
};

struct TraceReport {
  std::string dir;
  int world_size = 0;
  bool topology_found = false;
  int rank_files = 0;
  int64_t records = 0;
  std::vector<std::string> warnings;      // torn last lines, no topology.json
  std::vector<TraceMismatch> mismatches;  // sorted: the first is the earliest problem
  std::map<TrafficKey, Traffic> traffic;  // per (group, step, phase)
  std::map<std::string, Traffic> group_traffic;
  // Who sent how much (the report's rank × rank view): per (world rank, group) that rank's own
  // completed collective records, and per (sender, receiver) world ranks the send/isend records.
  std::map<std::pair<int, std::string>, Traffic> rank_collectives;
  std::map<std::pair<int, int>, Traffic> p2p_sent;

  // Traced traffic per (rank, step, group, phase) against DIR/comm_predicted.json (trace_prediction.h).
  bool prediction_found = false;
  int64_t prediction_cells = 0;
  // comm_predicted.json summed over the ranks per (group, step, phase): the cells compared (ops, bytes).
  std::map<TrafficKey, Traffic> predicted_traffic;
  std::vector<TraceMismatch> prediction_mismatches;  // kind "prediction", by step, phase, rank

  bool consistent() const { return mismatches.empty(); }
  bool matches_prediction() const { return prediction_found && prediction_mismatches.empty(); }
  // Human summary: verdict, first mismatch, up to `max_listed` more, warnings, per-group traffic.
  std::string summary(size_t max_listed = 10) const;
  nlohmann::json to_json() const;
};

// The records of one rank's file.
struct RankTrace {
  int world_rank = 0;
  std::string path = {};
  std::vector<comm::TraceRecord> records = {};
  bool torn_tail = false;  // the last line was incomplete and was dropped
  int64_t torn_bytes = 0;
  bool unreadable = false;  // the file exists but could not be read or parsed (reported once)
};

// Parses one file's text. A last line without '\n' that is not a valid record is a torn tail
// (dropped, flagged); any other bad line is an error naming path:line and the field.
Result<RankTrace> parse_rank_trace(std::string_view text, int world_rank, const std::string& path);

// Checks already-parsed traces against `world_size` ranks. `topology` may be null.
TraceReport check_traces(std::vector<RankTrace> ranks, int world_size, const nlohmann::json* topology);

// Reads and checks DIR (and compares with DIR/comm_predicted.json when present). Errors (usage, exit 2): DIR or
// DIR/trace/ does not exist, or holds no rank file. Unreadable or corrupt files become mismatches in the report.
Result<TraceReport> check_trace_dir(const std::string& dir);

}  // namespace sp::evidence
