// The trace checker's machinery (evidence/trace_check.h): the Checker that walks every group of every rank's
// records, and the helpers its messages share. Internal to trace_checker.cc (records, members, sequences,
// failures) and trace_collectives.cc (what a group's members must agree on, p2p pairing); not an API.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "comm/process_grid.h"
#include "evidence/trace_check.h"

namespace sp::evidence::trace_detail {

using comm::TraceRecord;
using nlohmann::json;

std::string ranks_text(const std::vector<int>& ranks);  // "rank 3", "ranks 0, 2"

struct ValueGroup {
  std::string value;
  std::vector<int> ranks;
};
// Groups (rank, value) pairs by value: the most common value first (ties: the lowest rank first).
std::vector<ValueGroup> group_values(const std::vector<std::pair<int, std::string>>& values);

// The fields every member of a collective must agree on, in the order they are compared.
struct Field {
  const char* name;
  std::function<std::string(const comm::TraceRecord&)> value;
};
const std::vector<Field>& collective_fields();

class Checker {
 public:
  Checker(TraceReport& report, const std::vector<RankTrace>& ranks) : report_(report), ranks_(ranks) {
    for (const RankTrace& rt : ranks_)
      if (!rt.unreadable) usable_.insert(rt.world_rank);
  }

  void run(const json* topology);

 private:
  using OpList = std::vector<const TraceRecord*>;
  struct Group {
    int size = 0;
    std::vector<int> members;   // world ranks by group rank; −1 unknown
    std::map<int, OpList> ops;  // world rank → its records on this group, by seq
  };

  // Locates the mismatch in the run (step, phase) from the record it names, for first-divergence reports.
  void add(TraceMismatch m) {
    if (const TraceRecord* r = m.step < 0 ? find_record(m.group, m.seq, m.ranks) : nullptr) {
      m.step = r->step;
      m.phase = std::string(comm::phase_name(r->phase));
    }
    report_.mismatches.push_back(std::move(m));
  }
  const TraceRecord* find_record(const std::string& group, int64_t seq, const std::vector<int>& ranks) const {
    const auto g = groups_.find(group);
    if (g == groups_.end() || seq < 0) return nullptr;
    for (int w : ranks)
      if (auto it = g->second.ops.find(w); it != g->second.ops.end())
        for (const TraceRecord* r : it->second)
          if (r->seq == seq) return r;
    // The named rank lacks the op (missing_op): the members that issued it say where it was.
    for (const auto& [w, ops] : g->second.ops)
      for (const TraceRecord* r : ops)
        if (r->seq == seq) return r;
    // A gap (a missing seq) is located by the last record before it.
    const TraceRecord* before = nullptr;
    for (int w : ranks)
      if (auto it = g->second.ops.find(w); it != g->second.ops.end())
        for (const TraceRecord* r : it->second)
          if (r->seq < seq && (before == nullptr || r->seq > before->seq)) before = r;
    return before;
  }
  // A rank whose trace file was read; a missing or unreadable one is reported once, not per op.
  bool usable(int world_rank) const { return usable_.count(world_rank) > 0; }
  void index_records();
  void check_sequence(const std::string& name, int world_rank, const OpList& ops);
  void resolve_members(const std::string& name, Group& g);
  void check_collectives(const std::string& name, const Group& g);
  void check_p2p(const std::string& name, const Group& g);
  void report_failures();
  // `novel`: the ranks whose op at this position the group never issued at an earlier step (novel_ranks);
  // it decides between value groups of equal size, where no majority can.
  void add_value_mismatch(const std::string& kind, const std::string& group, const std::string& field,
                          const std::vector<std::pair<int, std::string>>& values, int64_t seq, int64_t t_us,
                          const std::string& where, const std::vector<int>& novel = {});
  // Whether `w`, lacking the group's collective #i, only failed to record it: the job was stopped and killed
  // `w` at or after its last record (the op's step is not before it: `w` may have recorded nothing of the op's
  // step, when the op is its first of that step), a member completed the op, which completes only once all
  // members have joined, and every member that recorded it recorded that op (some may have failed inside it as
  // the job went down; none waited it out). So `w` joined it too and was killed before its record.
  bool recorded_by_others_only(int w, const std::vector<std::pair<int, OpList>>& parts, size_t i) const;

  // A job stopped by a failed check or the watchdog (a record marked aborted or timed_out): its ranks were
  // killed in the middle of a step, and a nonblocking op in flight then was never recorded (a record is
  // written when its op completes). Such an op is missing only in the step each rank stopped in.
  bool in_flight_at_stop(int world_rank, int64_t step) const {
    const auto it = last_step_.find(world_rank);
    return stopped_ && it != last_step_.end() && step >= it->second;
  }

  TraceReport& report_;
  const std::vector<RankTrace>& ranks_;
  bool stopped_ = false;
  std::map<int, int64_t> last_step_;  // world rank → the step of its last record
  std::map<std::string, Group> groups_;
  std::set<int> usable_;
  std::optional<comm::ProcessGrid> grid_;
};

}  // namespace sp::evidence::trace_detail
