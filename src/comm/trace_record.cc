#include "comm/trace_record.h"

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>

namespace sp::comm {
namespace {
using nlohmann::json;
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// Reads typed fields from one record; remembers the first problem so the caller reports one
// message naming the field.
class FieldReader {
 public:
  explicit FieldReader(const json& j) : j_(j) {}
  const Status& status() const { return status_; }
  bool has(const char* key) const { return j_.contains(key); }

  int64_t integer(const char* key, int64_t lo, int64_t hi, int64_t fallback = 0) {
    if (!status_.ok()) return fallback;
    const auto it = j_.find(key);
    if (it == j_.end()) return fail(fallback, "field '{}' is missing", key);
    if (!it->is_number_integer()) return fail(fallback, "field '{}' is not an integer", key);
    if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(kI64Max))
      return fail(fallback, "field '{}' = {} is out of range", key, it->get<uint64_t>());
    const int64_t v = it->get<int64_t>();
    if (v < lo || v > hi) return fail(fallback, "field '{}' = {} is outside [{}, {}]", key, v, lo, hi);
    return v;
  }
  std::string string(const char* key) {
    if (!status_.ok()) return {};
    const auto it = j_.find(key);
    if (it == j_.end()) return fail(std::string(), "field '{}' is missing", key);
    if (!it->is_string()) return fail(std::string(), "field '{}' is not a string", key);
    return it->get<std::string>();
  }
  template <typename T>
  std::vector<T> int_array(const char* key, size_t expected_size, int64_t lo, int64_t hi) {
    std::vector<T> out;
    if (!status_.ok()) return out;
    const auto it = j_.find(key);
    if (it == j_.end()) return fail(out, "field '{}' is missing", key);
    if (!it->is_array()) return fail(out, "field '{}' is not an array", key);
    if (it->size() != expected_size)
      return fail(out, "field '{}' has {} entries, expected group_size = {}", key, it->size(), expected_size);
    for (const json& e : *it) {
      if (!e.is_number_integer() || (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(kI64Max)))
        return fail(std::vector<T>(), "field '{}' holds a non-integer entry", key);
      const int64_t v = e.get<int64_t>();
      if (v < lo || v > hi) return fail(std::vector<T>(), "field '{}' holds {} outside [{}, {}]", key, v, lo, hi);
      out.push_back(static_cast<T>(v));
    }
    return out;
  }
  std::optional<Digest128> digest(const char* key) {
    if (!status_.ok() || !has(key)) return std::nullopt;
    const std::string hex = string(key);
    if (!status_.ok()) return std::nullopt;
    Result<Digest128> d = Digest128::from_hex(hex);
    if (!d.ok()) return fail(std::optional<Digest128>(), "field '{}': {}", key, d.status().message());
    return *d;
  }
  template <typename T, typename... Args>
  T fail(T fallback, fmt::format_string<Args...> f, Args&&... args) {
    if (status_.ok()) status_ = corrupt(f, std::forward<Args>(args)...);
    return fallback;
  }

 private:
  const json& j_;
  Status status_;
};

bool op_has_reduce(OpKind op) { return op == OpKind::kAllReduce || op == OpKind::kReduceScatter; }
bool op_has_root(OpKind op) { return op == OpKind::kBroadcast || op == OpKind::kGather; }
bool op_has_counts(OpKind op) {
  return op == OpKind::kReduceScatter || op == OpKind::kAllGather || op == OpKind::kGather || op == OpKind::kAllToAll;
}
}  // namespace

std::string trace_file_name(int world_rank) { return fmt::format("rank-{:05d}.jsonl", world_rank); }

std::string trace_file_path(const std::string& run_dir, int world_rank) {
  return fmt::format("{}/{}/{}", run_dir, kTraceDirName, trace_file_name(world_rank));
}

std::optional<int> trace_file_rank(std::string_view name) {
  constexpr std::string_view kPrefix = "rank-", kSuffix = ".jsonl";
  if (name.size() < kPrefix.size() + 5 + kSuffix.size() || !name.starts_with(kPrefix) || !name.ends_with(kSuffix))
    return std::nullopt;
  const std::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  int rank = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (ec != std::errc() || end != digits.data() + digits.size() || rank < 0 || digits.size() < 5) return std::nullopt;
  if (trace_file_name(rank) != name) return std::nullopt;  // canonical spelling only
  return rank;
}

int64_t wire_bytes_of(OpKind op, int64_t bytes, int group_size) {
  const int64_t n = group_size;
  switch (op) {
    case OpKind::kAllReduce:
      return 2 * (n - 1) * bytes / n;
    case OpKind::kReduceScatter:
    case OpKind::kAllGather:
    case OpKind::kAllToAll:
    case OpKind::kBroadcast:
    case OpKind::kGather:
      return (n - 1) * bytes / n;
    case OpKind::kSend:
    case OpKind::kRecv:
    case OpKind::kIsend:
    case OpKind::kIrecv:
      return bytes;
    case OpKind::kBarrier:
      return 0;
  }
  return 0;
}

int64_t digested_bytes_of(OpKind op, int64_t bytes, int group_size) {
  switch (op) {
    case OpKind::kAllReduce:
    case OpKind::kAllToAll:
    case OpKind::kBroadcast:
      return 2 * bytes;
    case OpKind::kReduceScatter:
    case OpKind::kAllGather:
    case OpKind::kGather:
      return bytes + bytes / group_size;
    case OpKind::kSend:
    case OpKind::kRecv:
    case OpKind::kIsend:
    case OpKind::kIrecv:
      return bytes;
    case OpKind::kBarrier:
      return 0;
  }
  return 0;
}

std::string trace_record_to_json(const TraceRecord& r) {
  nlohmann::ordered_json j;
  j["group"] = r.group;
  j["group_size"] = r.group_size;
  j["group_rank"] = r.group_rank;
  if (!r.members.empty()) j["members"] = r.members;
  j["seq"] = r.seq;
  j["op"] = op_kind_name(r.op);
  if (r.op != OpKind::kBarrier) j["dtype"] = dtype_name(r.dtype);
  j["count"] = r.count;
  if (!r.counts.empty() || op_has_counts(r.op)) j["counts"] = r.counts;
  if (r.op == OpKind::kAllToAll) j["recv_counts"] = r.recv_counts;
  j["bytes"] = r.bytes;
  j["wire_bytes"] = r.wire_bytes;
  if (r.reduce) j["reduce"] = reduce_op_name(*r.reduce);
  if (op_has_root(r.op) && r.root >= 0) {
    j["root"] = r.root;
    j["root_world"] = r.root_world;
  }
  if (op_is_p2p(r.op)) {
    j["peer"] = r.peer;
    j["peer_world"] = r.peer_world;
    j["tag"] = r.tag;
  }
  j["phase"] = phase_name(r.phase);
  j["step"] = r.step;
  j["micro_batch"] = r.micro_batch;
  j["t_start_us"] = r.t_start_us;
  j["t_end_us"] = r.t_end_us;
  if (r.in_digest) j["in_digest"] = r.in_digest->hex();
  if (r.out_digest) j["out_digest"] = r.out_digest->hex();
  if (r.timed_out) j["timed_out"] = true;
  if (r.aborted) j["aborted"] = true;
  if (r.nonblocking) j["nonblocking"] = true;
  return j.dump();
}

Result<TraceRecord> trace_record_from_json(const json& j) {
  if (!j.is_object()) return corrupt("trace record is not a JSON object");
  FieldReader f(j);
  TraceRecord r;
  r.group = f.string("group");
  if (f.status().ok() && r.group.empty()) return corrupt("field 'group' is empty");
  r.group_size = static_cast<int>(f.integer("group_size", 1, kIntMax, 1));
  r.group_rank = static_cast<int>(f.integer("group_rank", 0, r.group_size - 1));
  const size_t n = static_cast<size_t>(r.group_size);
  if (f.has("members")) r.members = f.int_array<int>("members", n, 0, kIntMax);
  r.seq = f.integer("seq", 0, kI64Max);
  const std::string op = f.string("op");
  if (!f.status().ok()) return f.status();
  const std::optional<OpKind> kind = op_kind_from_name(op);
  if (!kind) return corrupt("field 'op' = '{}' is not a known operation", op);
  r.op = *kind;
  if (r.op != OpKind::kBarrier) {
    const std::string dtype = f.string("dtype");
    if (!f.status().ok()) return f.status();
    const std::optional<DType> t = dtype_from_name(dtype);
    if (!t) return corrupt("field 'dtype' = '{}' is not a known dtype", dtype);
    r.dtype = *t;
  }
  r.count = f.integer("count", 0, kI64Max);
  if (op_has_counts(r.op)) r.counts = f.int_array<int64_t>("counts", n, 0, kI64Max);
  if (r.op == OpKind::kAllToAll) r.recv_counts = f.int_array<int64_t>("recv_counts", n, 0, kI64Max);
  r.bytes = f.integer("bytes", 0, kI64Max);
  r.wire_bytes = f.integer("wire_bytes", 0, kI64Max);
  // `reduce` and `root` may be absent: a trace converted from a Flight Recorder dump (which records neither) says
  // it does not know them, and the checker compares them as such ("-", -1) on every member.
  if (op_has_reduce(r.op) && j.contains("reduce")) {
    const std::string reduce = f.string("reduce");
    if (!f.status().ok()) return f.status();
    r.reduce = reduce_op_from_name(reduce);
    if (!r.reduce) return corrupt("field 'reduce' = '{}' is not sum, max or min", reduce);
  }
  if (op_has_root(r.op) && (j.contains("root") || j.contains("root_world"))) {
    r.root = static_cast<int>(f.integer("root", 0, r.group_size - 1));
    r.root_world = static_cast<int>(f.integer("root_world", 0, kIntMax));
  }
  if (op_is_p2p(r.op)) {
    r.peer = static_cast<int>(f.integer("peer", 0, r.group_size - 1));
    r.peer_world = static_cast<int>(f.integer("peer_world", 0, kIntMax));
    r.tag = static_cast<int>(f.integer("tag", 0, kMaxTag));
  }
  const std::string phase = f.string("phase");
  if (!f.status().ok()) return f.status();
  const std::optional<Phase> p = phase_from_name(phase);
  if (!p) return corrupt("field 'phase' = '{}' is not a known phase", phase);
  r.phase = *p;
  r.step = f.integer("step", -1, kI64Max);
  r.micro_batch = f.integer("micro_batch", -1, kI64Max);
  r.t_start_us = f.integer("t_start_us", 0, kI64Max);
  r.t_end_us = f.integer("t_end_us", 0, kI64Max);
  r.in_digest = f.digest("in_digest");
  r.out_digest = f.digest("out_digest");
  if (f.has("timed_out")) {
    if (!j["timed_out"].is_boolean()) return corrupt("field 'timed_out' is not a boolean");
    r.timed_out = j["timed_out"].get<bool>();
  }
  if (f.has("aborted")) {
    if (!j["aborted"].is_boolean()) return corrupt("field 'aborted' is not a boolean");
    r.aborted = j["aborted"].get<bool>();
  }
  if (f.has("nonblocking")) {
    if (!j["nonblocking"].is_boolean()) return corrupt("field 'nonblocking' is not a boolean");
    r.nonblocking = j["nonblocking"].get<bool>();
  }
  if (!f.status().ok()) return f.status();
  // Cross-field invariants: a record that contradicts itself is corrupt, not a desync.
  if (r.op != OpKind::kBarrier) {
    const int64_t size = static_cast<int64_t>(dtype_size(r.dtype));
    if (r.count > kI64Max / size || r.bytes != r.count * size)
      return corrupt("bytes {} ≠ count {} × {} bytes per {}", r.bytes, r.count, size, dtype_name(r.dtype));
  }
  if (!r.timed_out && !r.aborted && r.t_end_us < r.t_start_us)
    return corrupt("t_end_us {} is before t_start_us {}", r.t_end_us, r.t_start_us);
  if (op_has_counts(r.op)) {
    int64_t total = 0;
    for (int64_t c : r.counts) {
      if (c > kI64Max - total) return corrupt("field 'counts' sums past 2^63");
      total += c;
    }
    if (total != r.count) return corrupt("count {} ≠ Σcounts = {}", r.count, total);
  }
  return r;
}

}  // namespace sp::comm
