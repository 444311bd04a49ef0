#include "evidence/trace_check.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>

#include "comm/topology.h"
#include "core/file_io.h"
#include "core/json_io.h"
#include "evidence/bundle_paths.h"
#include "evidence/trace_prediction.h"

namespace sp::evidence {
namespace {
using comm::OpKind;
using comm::TraceRecord;
using nlohmann::json;

std::string ranks_text(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  return fmt::format("ranks {}", fmt::join(ranks, ", "));
}

struct ValueGroup {
  std::string value;
  std::vector<int> ranks;
};

// Groups (rank, value) pairs by value: the most common value first (ties: the lowest rank first).
std::vector<ValueGroup> group_values(const std::vector<std::pair<int, std::string>>& values) {
  std::vector<ValueGroup> groups;
  for (const auto& [rank, value] : values) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const ValueGroup& g) { return g.value == value; });
    if (it == groups.end())
      groups.push_back({value, {rank}});
    else
      it->ranks.push_back(rank);
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const ValueGroup& a, const ValueGroup& b) { return a.ranks.size() > b.ranks.size(); });
  return groups;
}

std::string counts_text(const std::vector<int64_t>& c) { return fmt::format("[{}]", fmt::join(c, ", ")); }

// The fields every member of a collective must agree on, in the order they are compared.
struct Field {
  const char* name;
  std::function<std::string(const TraceRecord&)> value;
};
const std::vector<Field>& collective_fields() {
  static const std::vector<Field> kFields = {
      {"op", [](const TraceRecord& r) { return std::string(comm::op_kind_name(r.op)); }},
      {"dtype", [](const TraceRecord& r) { return r.op == OpKind::kBarrier ? "-" : std::string(dtype_name(r.dtype)); }},
      {"reduce", [](const TraceRecord& r) { return r.reduce ? std::string(comm::reduce_op_name(*r.reduce)) : "-"; }},
      {"root", [](const TraceRecord& r) { return std::to_string(r.root); }},
      // all_to_all counts legitimately differ per rank; its send/recv matrix is checked separately.
      {"count", [](const TraceRecord& r) { return r.op == OpKind::kAllToAll ? "*" : std::to_string(r.count); }},
      {"counts", [](const TraceRecord& r) { return r.op == OpKind::kAllToAll ? "*" : counts_text(r.counts); }},
      {"group_size", [](const TraceRecord& r) { return std::to_string(r.group_size); }},
      {"step", [](const TraceRecord& r) { return std::to_string(r.step); }},
      {"phase", [](const TraceRecord& r) { return std::string(comm::phase_name(r.phase)); }},
      // Not micro_batch: it is the global micro-batch index, which differs across dp ranks by design
      // (a ZeRO-3 gather pairs dp rank 0's micro-batch 0 with dp rank 1's micro-batch 2).
  };
  return kFields;
}

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
  void add_value_mismatch(const std::string& kind, const std::string& group, const std::string& field,
                          const std::vector<std::pair<int, std::string>>& values, int64_t seq, int64_t t_us,
                          const std::string& where);

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

void Checker::add_value_mismatch(const std::string& kind, const std::string& group, const std::string& field,
                                 const std::vector<std::pair<int, std::string>>& values, int64_t seq, int64_t t_us,
                                 const std::string& where) {
  const std::vector<ValueGroup> vg = group_values(values);
  TraceMismatch m{.kind = kind, .group = group, .seq = seq, .field = field, .t_us = t_us};
  m.expected = fmt::format("{} on {}", vg[0].value, ranks_text(vg[0].ranks));
  std::vector<std::string> others;
  for (size_t i = 1; i < vg.size(); ++i) {
    others.push_back(fmt::format("{} on {}", vg[i].value, ranks_text(vg[i].ranks)));
    m.ranks.insert(m.ranks.end(), vg[i].ranks.begin(), vg[i].ranks.end());
  }
  // Without a majority (e.g. two ranks that disagree) no rank can be singled out: name them all.
  if (vg.size() > 1 && vg[0].ranks.size() == vg[1].ranks.size())
    m.ranks.insert(m.ranks.end(), vg[0].ranks.begin(), vg[0].ranks.end());
  std::sort(m.ranks.begin(), m.ranks.end());
  m.actual = fmt::format("{}", fmt::join(others, "; "));
  m.message = fmt::format("group '{}' seq {}{}: {} differs: {} vs {}", group, seq, where, field, m.expected, m.actual);
  add(std::move(m));
}

void Checker::index_records() {
  for (const RankTrace& rt : ranks_)
    for (const TraceRecord& r : rt.records) {
      stopped_ = stopped_ || r.aborted || r.timed_out;
      int64_t& last = last_step_.try_emplace(rt.world_rank, r.step).first->second;
      last = std::max(last, r.step);
    }
  for (const RankTrace& rt : ranks_) {
    if (rt.torn_tail)
      report_.warnings.push_back(fmt::format("{}: torn last line ({} bytes) ignored", rt.path, rt.torn_bytes));
    std::map<std::string, OpList> mine;
    for (const TraceRecord& r : rt.records) {
      mine[r.group].push_back(&r);
      ++report_.records;
      if (r.timed_out || r.aborted) continue;
      Traffic& t = report_.traffic[TrafficKey{r.group, r.step, r.phase}];
      Traffic& g = report_.group_traffic[r.group];
      // The sender's side only: a p2p message is counted once, at its sender.
      Traffic* who = !comm::op_is_p2p(r.op) ? &report_.rank_collectives[{rt.world_rank, r.group}]
                     : r.op == comm::OpKind::kSend || r.op == comm::OpKind::kIsend
                         ? &report_.p2p_sent[{rt.world_rank, r.peer_world}]
                         : nullptr;
      for (Traffic* x : {&t, &g, who}) {
        if (x == nullptr) continue;
        ++x->ops;
        x->bytes += r.bytes;
        x->wire_bytes += r.wire_bytes;
      }
    }
    for (auto& [name, ops] : mine) {
      std::stable_sort(ops.begin(), ops.end(),
                       [](const TraceRecord* a, const TraceRecord* b) { return a->seq < b->seq; });
      check_sequence(name, rt.world_rank, ops);
      groups_[name].ops[rt.world_rank] = std::move(ops);
    }
  }
}

void Checker::check_sequence(const std::string& name, int world_rank, const OpList& ops) {
  for (size_t i = 0; i < ops.size(); ++i) {
    const int64_t seq = ops[i]->seq;
    if (seq == static_cast<int64_t>(i)) continue;
    const bool dup = i > 0 && ops[i - 1]->seq == seq;
    if (!dup && std::all_of(ops.begin() + static_cast<std::ptrdiff_t>(i), ops.end(),
                            [&](const TraceRecord* r) { return in_flight_at_stop(world_rank, r->step); })) {
      report_.warnings.push_back(fmt::format(
          "rank {}, group '{}': seq {} is missing in step {}, where the stopped job killed the rank: an op in "
          "flight then is never recorded (not a mismatch)",
          world_rank, name, i, ops[i]->step));
      return;
    }
    TraceMismatch m{.kind = dup ? "seq_duplicate" : "seq_gap",
                    .group = name,
                    .seq = seq,
                    .ranks = {world_rank},
                    .field = "seq",
                    .t_us = ops[i]->t_start_us};
    m.expected = std::to_string(i);
    m.actual = std::to_string(seq);
    m.step = ops[i]->step;  // located by the record after the gap
    m.phase = std::string(comm::phase_name(ops[i]->phase));
    m.message = dup ? fmt::format("rank {}, group '{}': seq {} appears twice", world_rank, name, seq)
                    : fmt::format("rank {}, group '{}': seq jumps from {} to {} (seq {} is missing)", world_rank, name,
                                  i == 0 ? -1 : ops[i - 1]->seq, seq, i);
    add(std::move(m));
    return;  // later positions are shifted; one report per rank and group
  }
}

void Checker::resolve_members(const std::string& name, Group& g) {
  // Group size: every record of every rank must agree (the per-op comparison reports the first
  // differing one; here we only need a size to index members).
  g.size = g.ops.begin()->second.front()->group_size;
  for (const auto& [rank, ops] : g.ops) g.size = std::max(g.size, ops.front()->group_size);
  if (g.size > report_.world_size) {
    add({.kind = "members",
         .group = name,
         .field = "group_size",
         .message =
             fmt::format("group '{}' claims {} members, the world has {} ranks", name, g.size, report_.world_size)});
    g.size = 0;
    return;
  }
  g.members.assign(static_cast<size_t>(g.size), -1);
  std::vector<std::pair<int, std::string>> listed;  // rank → members list it recorded
  for (const auto& [rank, ops] : g.ops) {
    for (const TraceRecord* r : ops) {
      if (r->members.empty()) continue;
      listed.emplace_back(rank, fmt::format("[{}]", fmt::join(r->members, ", ")));
      if (static_cast<int>(r->members.size()) == g.size) g.members = r->members;
      break;
    }
  }
  if (!listed.empty() && group_values(listed).size() > 1)
    add_value_mismatch("members", name, "members", listed, 0, 0, "");
  const std::optional<comm::Axis> axis =
      name.size() > 3 && name[2] == '[' ? comm::axis_from_name(name.substr(0, 2)) : std::nullopt;
  if (grid_ && axis) {
    // "dp[tp0.pp1]": the members must be the grid's group on that axis.
    for (const auto& [rank, ops] : g.ops) {
      if (rank >= grid_->world_size() || grid_->group_name(*axis, rank) != name) {
        add({.kind = "members",
             .group = name,
             .ranks = {rank},
             .message = fmt::format("rank {} traced group '{}', which is not one of its groups under {}", rank, name,
                                    grid_->describe())});
        return;
      }
      if (g.members != grid_->group_of(*axis, rank)) {
        add({.kind = "members",
             .group = name,
             .ranks = {rank},
             .message = fmt::format("group '{}' lists members [{}], the topology gives [{}]", name,
                                    fmt::join(g.members, ", "), fmt::join(grid_->group_of(*axis, rank), ", "))});
        return;
      }
    }
  }
  for (const auto& [rank, ops] : g.ops) {
    const int gr = ops.front()->group_rank;
    if (gr >= g.size || (g.members[static_cast<size_t>(gr)] != -1 && g.members[static_cast<size_t>(gr)] != rank)) {
      add({.kind = "members",
           .group = name,
           .ranks = {rank},
           .message = fmt::format("rank {} claims group rank {} of '{}', whose members are [{}]", rank, gr, name,
                                  fmt::join(g.members, ", "))});
      g.size = 0;
      return;
    }
    g.members[static_cast<size_t>(gr)] = rank;
  }
}

void Checker::check_collectives(const std::string& name, const Group& g) {
  // Participants: members whose trace file was read (a missing file is reported once, elsewhere).
  std::vector<std::pair<int, OpList>> parts;
  for (int w : g.members) {
    if (w < 0 || !usable(w)) continue;
    OpList colls;
    if (auto it = g.ops.find(w); it != g.ops.end())
      for (const TraceRecord* r : it->second)
        if (!comm::op_is_p2p(r->op)) colls.push_back(r);
    parts.emplace_back(w, std::move(colls));
  }
  size_t longest = 0;
  for (const auto& [w, colls] : parts) longest = std::max(longest, colls.size());
  for (size_t i = 0; i < longest; ++i) {
    const TraceRecord* first = nullptr;
    std::vector<std::pair<int, std::string>> ops;
    for (const auto& [w, colls] : parts) {
      const TraceRecord* r = i < colls.size() ? colls[i] : nullptr;
      if (r != nullptr && first == nullptr) first = r;
      ops.emplace_back(w, r ? std::string(comm::op_kind_name(r->op)) : "(none)");
    }
    const std::string where = first->seq == static_cast<int64_t>(i) ? "" : fmt::format(" (collective #{})", i);
    // The members that issued this op must agree on it; a member that differs is the one that left the
    // group's sequence (checked before a missing op: a rank killed by the job's end may not have
    // recorded an op the others did).
    for (const Field& f : collective_fields()) {
      std::vector<std::pair<int, std::string>> values;
      for (const auto& [w, colls] : parts)
        if (i < colls.size()) values.emplace_back(w, f.value(*colls[i]));
      if (group_values(values).size() > 1) {
        add_value_mismatch("field", name, f.name, values, first->seq, first->t_start_us, where);
        return;  // later positions are unreliable once the sequences diverge
      }
    }
    for (const auto& [w, colls] : parts) {
      if (i < colls.size()) continue;
      add_value_mismatch("missing_op", name, "op", ops, first->seq, first->t_start_us, where);
      report_.mismatches.back().message +=
          fmt::format("; rank {} issued {} collectives on this group", w, colls.size());
      return;
    }
    if (first->op == OpKind::kAllToAll) {
      // send_counts[b] on rank a must equal recv_counts[a] on rank b (group ranks).
      for (const auto& [wa, ca] : parts) {
        for (const auto& [wb, cb] : parts) {
          const int a = ca[i]->group_rank, b = cb[i]->group_rank;
          const int64_t sent = ca[i]->counts[static_cast<size_t>(b)], got = cb[i]->recv_counts[static_cast<size_t>(a)];
          if (sent == got) continue;
          add({.kind = "field",
               .group = name,
               .seq = ca[i]->seq,
               .ranks = {wa, wb},
               .field = "counts/recv_counts",
               .expected = std::to_string(sent),
               .actual = std::to_string(got),
               .message = fmt::format("group '{}' seq {}{}: all_to_all: rank {} sends {} elements to rank {}, which "
                                      "expects {}",
                                      name, ca[i]->seq, where, wa, sent, wb, got),
               .t_us = first->t_start_us});
          return;
        }
      }
    }
    if (first->op == OpKind::kBroadcast || first->op == OpKind::kAllGather) {
      // Every member receives the same bytes: their output digests must agree.
      std::vector<std::pair<int, std::string>> digests;
      for (const auto& [w, colls] : parts)
        if (colls[i]->out_digest) digests.emplace_back(w, colls[i]->out_digest->hex());
      if (group_values(digests).size() > 1)
        add_value_mismatch("payload", name, "out_digest", digests, first->seq, first->t_start_us, where);
    }
  }
}

void Checker::check_p2p(const std::string& name, const Group& g) {
  struct Key {
    int src, dst, tag;
    auto operator<=>(const Key&) const = default;
  };
  std::map<Key, OpList> sends, recvs;  // world ranks
  for (const auto& [w, ops] : g.ops) {
    for (const TraceRecord* r : ops) {
      if (!comm::op_is_p2p(r->op)) continue;
      const bool is_send = r->op == OpKind::kSend || r->op == OpKind::kIsend;
      const int peer = r->peer < g.size ? g.members[static_cast<size_t>(r->peer)] : -1;
      (is_send ? sends : recvs)[is_send ? Key{w, peer, r->tag} : Key{peer, w, r->tag}].push_back(r);
    }
  }
  std::set<Key> keys;
  for (const auto& kv : sends) keys.insert(kv.first);
  for (const auto& kv : recvs) keys.insert(kv.first);
  for (const Key& k : keys) {
    if (!usable(k.src) || !usable(k.dst)) continue;
    const OpList& s = sends[k];
    const OpList& r = recvs[k];
    for (size_t i = 0; i < std::max(s.size(), r.size()); ++i) {
      if (i >= s.size() || i >= r.size()) {
        const TraceRecord* lone = i < s.size() ? s[i] : r[i];
        const int lacking = i < s.size() ? k.dst : k.src;
        if (in_flight_at_stop(lacking, lone->step)) {  // the peer was killed before it recorded its side
          report_.warnings.push_back(fmt::format(
              "group '{}': the {} with seq {} on rank {} (step {}) has no match on rank {}, which the stopped "
              "job killed in step {} (not a mismatch)",
              name, comm::op_kind_name(lone->op), lone->seq, i < s.size() ? k.src : k.dst, lone->step, lacking,
              last_step_.at(lacking)));
          break;
        }
        add({.kind = "p2p_unmatched",
             .group = name,
             .seq = lone->seq,
             .ranks = {k.src, k.dst},
             .field = "peer",
             .message = fmt::format("group '{}': rank {} sent {} messages with tag {} to rank {}, which received {}; "
                                    "the {} with seq {} on rank {} has no match",
                                    name, k.src, s.size(), k.tag, k.dst, r.size(), comm::op_kind_name(lone->op),
                                    lone->seq, i < s.size() ? k.src : k.dst),
             .t_us = lone->t_start_us});
        break;
      }
      const std::string sv[3] = {std::to_string(s[i]->count), std::string(dtype_name(s[i]->dtype)),
                                 s[i]->in_digest ? s[i]->in_digest->hex() : ""};
      const std::string rv[3] = {std::to_string(r[i]->count), std::string(dtype_name(r[i]->dtype)),
                                 r[i]->out_digest ? r[i]->out_digest->hex() : ""};
      const char* names[3] = {"count", "dtype", "digest"};
      for (int f = 0; f < 3; ++f) {
        if (sv[f] == rv[f] || (f == 2 && (sv[f].empty() || rv[f].empty()))) continue;
        add({.kind = f == 2 ? "payload" : "p2p_field",
             .group = name,
             .seq = s[i]->seq,
             .ranks = {k.src, k.dst},
             .field = names[f],
             .expected = sv[f],
             .actual = rv[f],
             .message = fmt::format("group '{}': message #{} from rank {} to rank {} (tag {}, send seq {}, recv seq "
                                    "{}): {} sent {} but received {}",
                                    name, i, k.src, k.dst, k.tag, s[i]->seq, r[i]->seq, names[f], sv[f], rv[f]),
             .t_us = s[i]->t_start_us});
        break;
      }
    }
  }
}

void Checker::run(const json* topology) {
  if (topology != nullptr) {
    if (Status s = comm::validate_topology(*topology); !s.ok())
      add({.kind = "topology", .message = s.message()});
    else
      grid_ = *comm::grid_from_topology(*topology);
  }
  std::set<int> have;
  for (const RankTrace& rt : ranks_) have.insert(rt.world_rank);
  for (int r = 0; r < report_.world_size; ++r) {
    if (!have.count(r))
      add({.kind = "missing_rank_file",
           .ranks = {r},
           .message =
               fmt::format("no trace file for world rank {} ({})", r,
                           report_.dir.empty() ? comm::trace_file_name(r) : comm::trace_file_path(report_.dir, r))});
  }
  for (int r : have) {
    if (r >= report_.world_size)
      add({.kind = "extra_rank_file",
           .ranks = {r},
           .message = fmt::format("trace file for rank {}, but the world has {} ranks", r, report_.world_size)});
  }
  index_records();
  for (auto& [name, g] : groups_) {
    resolve_members(name, g);
    if (g.size == 0) continue;
    check_collectives(name, g);
    check_p2p(name, g);
  }
  for (const auto& [name, g] : groups_) {
    std::vector<int> stuck;
    const TraceRecord* first = nullptr;
    for (const auto& [w, ops] : g.ops)
      for (const TraceRecord* r : ops)
        if (r->timed_out) {
          stuck.push_back(w);
          if (first == nullptr) first = r;
        }
    if (first == nullptr) continue;
    add({.kind = "timed_out",
         .group = name,
         .seq = first->seq,
         .ranks = stuck,
         .field = "timed_out",
         .message = fmt::format("group '{}': the watchdog stopped {} waiting in {} (seq {}, phase {}, step {})", name,
                                ranks_text(stuck), comm::op_kind_name(first->op), first->seq,
                                comm::phase_name(first->phase), first->step),
         .t_us = first->t_start_us});
  }
  for (const auto& [name, g] : groups_)
    for (const auto& [w, ops] : g.ops)
      for (const TraceRecord* r : ops)
        if (r->aborted)
          add({.kind = "aborted",
               .group = name,
               .seq = r->seq,
               .ranks = {w},
               .field = "aborted",
               .message = fmt::format("group '{}': rank {} failed inside {} (seq {}, phase {}, step {})", name, w,
                                      comm::op_kind_name(r->op), r->seq, comm::phase_name(r->phase), r->step),
               .t_us = r->t_start_us});
  std::stable_sort(report_.mismatches.begin(), report_.mismatches.end(),
                   [](const TraceMismatch& a, const TraceMismatch& b) { return a.t_us < b.t_us; });
}

}  // namespace

std::string TraceReport::summary(size_t max_listed) const {
  std::string out = fmt::format("trace check {}: {}\n", dir.empty() ? "(in memory)" : dir,
                                consistent() ? "consistent" : "INCONSISTENT");
  out += fmt::format("  world size {}{}, {} rank files, {} records, {} groups\n", world_size,
                     topology_found ? "" : " (inferred: no topology.json)", rank_files, records, group_traffic.size());
  if (!consistent()) {
    out += fmt::format("  first mismatch: {}\n", mismatches[0].message);
    for (size_t i = 1; i < mismatches.size() && i <= max_listed; ++i)
      out += fmt::format("  also [{}]: {}\n", mismatches[i].kind, mismatches[i].message);
    if (mismatches.size() > max_listed + 1)
      out += fmt::format("  ... and {} more\n", mismatches.size() - max_listed - 1);
  }
  if (!prediction_found) out += "  traffic vs comm_predicted.json: not compared (no comm_predicted.json)\n";
  if (prediction_found) {
    out += fmt::format("  traffic vs comm_predicted.json: {} ({} cells of rank x step x group x phase)\n",
                       prediction_mismatches.empty() ? "as predicted" : "DIFFERS", prediction_cells);
    for (size_t i = 0; i < prediction_mismatches.size() && i <= max_listed; ++i)
      out += fmt::format("  {} {}\n", i == 0 ? "first difference:" : "also:", prediction_mismatches[i].message);
  }
  for (const std::string& w : warnings) out += fmt::format("  warning: {}\n", w);
  if (!group_traffic.empty()) {
    out += fmt::format("  {:<24} {:>10} {:>16} {:>16}\n", "group", "ops", "bytes", "wire_bytes");
    for (const auto& [group, t] : group_traffic)
      out += fmt::format("  {:<24} {:>10} {:>16} {:>16}\n", group, t.ops, t.bytes, t.wire_bytes);
  }
  return out;
}

nlohmann::json TraceReport::to_json() const {
  json j;
  j["dir"] = dir;
  j["consistent"] = consistent();
  j["world_size"] = world_size;
  j["topology_found"] = topology_found;
  j["rank_files"] = rank_files;
  j["records"] = records;
  j["warnings"] = warnings;
  json ms = json::array();
  for (const TraceMismatch& m : mismatches) {
    ms.push_back({{"kind", m.kind},
                  {"group", m.group},
                  {"seq", m.seq},
                  {"step", m.step},
                  {"phase", m.phase},
                  {"ranks", m.ranks},
                  {"field", m.field},
                  {"expected", m.expected},
                  {"actual", m.actual},
                  {"message", m.message}});
  }
  j["mismatches"] = std::move(ms);
  j["prediction_found"] = prediction_found;
  j["prediction_cells"] = prediction_cells;
  json pm = json::array();
  for (const TraceMismatch& m : prediction_mismatches)
    pm.push_back({{"rank", m.ranks.empty() ? -1 : m.ranks[0]},
                  {"step", m.step},
                  {"group", m.group},
                  {"phase", m.phase},
                  {"traced", m.actual},
                  {"predicted", m.expected},
                  {"message", m.message}});
  j["prediction_mismatches"] = std::move(pm);
  json traffic_list = json::array();
  for (const auto& [k, t] : traffic) {
    traffic_list.push_back({{"group", k.group},
                            {"step", k.step},
                            {"phase", comm::phase_name(k.phase)},
                            {"ops", t.ops},
                            {"bytes", t.bytes},
                            {"wire_bytes", t.wire_bytes}});
  }
  j["traffic"] = std::move(traffic_list);
  json groups = json::object();
  for (const auto& [g, t] : group_traffic)
    groups[g] = {{"ops", t.ops}, {"bytes", t.bytes}, {"wire_bytes", t.wire_bytes}};
  j["group_traffic"] = std::move(groups);
  return j;
}

Result<RankTrace> parse_rank_trace(std::string_view text, int world_rank, const std::string& path) {
  RankTrace out{.world_rank = world_rank, .path = path};
  // A crash mid-write leaves at most a torn last line: tolerated and reported (docs/formats/trace.md).
  SP_ASSIGN_OR_RETURN(const JsonlDocument doc, parse_jsonl(text, path, TornTail::kAllow));
  out.torn_tail = doc.torn_bytes > 0;
  out.torn_bytes = doc.torn_bytes;
  for (size_t i = 0; i < doc.records.size(); ++i) {
    Result<TraceRecord> r = comm::trace_record_from_json(doc.records[i]);
    if (!r.ok()) return r.status().with_context(fmt::format("{}:{}", path, doc.line_numbers[i]));
    out.records.push_back(std::move(r).value());
  }
  return out;
}

TraceReport check_traces(std::vector<RankTrace> ranks, int world_size, const json* topology) {
  TraceReport report;
  report.world_size = world_size;
  report.topology_found = topology != nullptr;
  report.rank_files = static_cast<int>(ranks.size());
  Checker(report, ranks).run(topology);
  return report;
}

Result<TraceReport> check_trace_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const RunPaths paths(dir);
  const std::string trace_dir = paths.trace_dir();
  if (!fs::is_directory(dir, ec)) return invalid_argument("run directory '{}' does not exist", dir);
  if (!fs::is_directory(trace_dir, ec))
    return invalid_argument("'{}' has no trace/ directory", dir)
        .with_hint("pass the run directory (the one holding trace/rank-00000.jsonl and topology.json)");
  std::vector<TraceMismatch> file_problems;
  std::vector<std::string> warnings;
  std::vector<RankTrace> ranks;
  std::vector<std::string> ignored;
  SP_ASSIGN_OR_RETURN(const std::vector<RankFile> files, list_rank_files(trace_dir, &ignored));
  for (const std::string& p : ignored) warnings.push_back(fmt::format("ignored '{}': not a rank-NNNNN.jsonl file", p));
  for (const RankFile& f : files) {
    Result<std::string> text = read_file(f.path);
    Result<RankTrace> rt = text.ok() ? parse_rank_trace(*text, f.rank, f.path) : Result<RankTrace>(text.status());
    if (!rt.ok()) {
      file_problems.push_back({.kind = "corrupt_record", .ranks = {f.rank}, .message = rt.status().message()});
      ranks.push_back(RankTrace{.world_rank = f.rank, .path = f.path, .unreadable = true});
      continue;
    }
    ranks.push_back(std::move(rt).value());
  }
  if (ranks.empty())
    return invalid_argument("'{}' holds no rank-NNNNN.jsonl file", trace_dir).with_hint("was the run traced?");

  json topology;
  bool have_topology = false;
  const std::string topo_path = paths.topology();
  if (!path_exists(topo_path)) {
    warnings.push_back(fmt::format("{}: file does not exist; world size inferred from the traces", topo_path));
  } else if (Result<json> t = read_json_file(topo_path, uint64_t{1} << 28); t.ok()) {
    topology = std::move(t).value();
    have_topology = true;
  } else {
    file_problems.push_back({.kind = "topology", .message = t.status().message()});
  }
  int world = 0;
  if (have_topology && topology.is_object() && topology.contains("world_size") &&
      topology["world_size"].is_number_integer() && topology["world_size"].get<int64_t>() > 0 &&
      topology["world_size"].get<int64_t>() <= (1 << 24)) {
    world = topology["world_size"].get<int>();
  } else {
    for (const RankTrace& rt : ranks) {
      world = std::max(world, rt.world_rank + 1);
      for (const TraceRecord& r : rt.records)
        if (r.group == "world" && r.group_size <= (1 << 24)) world = std::max(world, r.group_size);
    }
  }
  TraceReport report;
  report.dir = dir;
  report.world_size = world;
  report.topology_found = have_topology;
  report.rank_files = static_cast<int>(ranks.size());
  Checker(report, ranks).run(have_topology ? &topology : nullptr);
  report.mismatches.insert(report.mismatches.begin(), file_problems.begin(), file_problems.end());
  if (path_exists(paths.comm_predicted())) {
    if (Result<json> p = read_json_file(paths.comm_predicted()); p.ok()) {
      compare_with_prediction(ranks, *p, report);
    } else {
      report.prediction_found = true;
      report.prediction_mismatches.push_back({.kind = "prediction", .message = p.status().message()});
    }
  }
  report.warnings.insert(report.warnings.begin(), warnings.begin(), warnings.end());
  return report;
}

}  // namespace sp::evidence
