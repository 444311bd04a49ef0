// TraceRecord: one line of trace/rank-NNNNN.jsonl, the record of one collective or p2p op.
// It is the format's single definition: TracedCommunicator writes it, the trace checker and the
// Chrome exporter (evidence/) read it back through trace_record_from_json, which validates every
// field (types, ranges, presence per op) so a damaged file yields a Status naming the field.
// Invariant: bytes = count · dtype size, and count is the payload defined per op in
// docs/formats/trace.md; wire_bytes = wire_bytes_of(op, bytes, group_size).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/communicator.h"
#include "comm/trace_context.h"
#include "core/hash.h"
#include "core/status.h"
#include "tensor/dtype.h"

namespace sp::comm {

inline constexpr std::string_view kTraceDirName = "trace";

// "rank-00003.jsonl": the file of world rank 3 inside DIR/trace/.
std::string trace_file_name(int world_rank);
// "DIR/trace/rank-00003.jsonl".
std::string trace_file_path(const std::string& run_dir, int world_rank);
// The world rank of a trace file name ("rank-00003.jsonl" → 3), or nullopt if it is not one.
std::optional<int> trace_file_rank(std::string_view file_name);

struct TraceRecord {
  std::string group;
  int group_size = 1;
  int group_rank = 0;
  std::vector<int> members;  // world ranks; on the first record of each group only (else empty)
  int64_t seq = 0;           // per rank and group, every op (collective or p2p), from 0
  OpKind op = OpKind::kBarrier;
  DType dtype = DType::kU8;  // not written for barrier
  int64_t count = 0;
  std::vector<int64_t> counts;       // reduce_scatter, all_gather, gather; all_to_all: send counts
  std::vector<int64_t> recv_counts;  // all_to_all only
  int64_t bytes = 0;
  int64_t wire_bytes = 0;
  std::optional<ReduceOp> reduce;  // all_reduce, reduce_scatter
  int root = -1;                   // broadcast, gather: group rank ...
  int root_world = -1;             // ... and world rank
  int peer = -1;                   // send, recv, isend, irecv: group rank ...
  int peer_world = -1;             // ... and world rank
  int tag = -1;                    // p2p only
  Phase phase = Phase::kSetup;
  int64_t step = -1;
  int64_t micro_batch = -1;
  int64_t t_start_us = 0;
  int64_t t_end_us = 0;  // 0 in a timed_out record
  std::optional<Digest128> in_digest;
  std::optional<Digest128> out_digest;
  bool timed_out = false;    // written by the watchdog: the op was still waiting when the job was stopped
  bool aborted = false;      // the op was in flight when this rank failed a check (an MPI error, a desync)
  bool nonblocking = false;  // a collective posted without blocking (iall_reduce, ...), written at completion
};

// Ideal per-rank traffic of a ring / pairwise algorithm, rounded down to whole bytes:
// all_reduce ⌊2(n−1)·bytes/n⌋; reduce_scatter, all_gather, all_to_all, broadcast, gather
// ⌊(n−1)·bytes/n⌋; p2p bytes; barrier 0.
int64_t wire_bytes_of(OpKind op, int64_t bytes, int group_size);
// Bytes TracedCommunicator digests (XXH3-128, with the trace on) for one record on one rank: its input and its
// output payload — all_reduce 2·bytes; reduce_scatter and all_gather bytes + bytes/n (the full buffer and the
// shard); all_to_all 2·bytes (equal counts); broadcast 2·bytes and gather bytes + bytes/n (the root's, the
// larger); a p2p transfer bytes; barrier 0.
int64_t digested_bytes_of(OpKind op, int64_t bytes, int group_size);

// One JSON object, no newline. Fields in the documented order; absent optionals are omitted.
std::string trace_record_to_json(const TraceRecord& record);
// Validates types, ranges and per-op required fields; errors name the field.
Result<TraceRecord> trace_record_from_json(const nlohmann::json& j);

}  // namespace sp::comm
