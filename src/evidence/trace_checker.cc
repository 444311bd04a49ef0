// The Checker (trace_checker.h): indexes every rank's records by group, sums the traffic, checks each rank's
// sequence numbers and each group's members against each other and the topology, and reports the ops the
// watchdog stopped or a rank failed inside; what members must agree on is trace_collectives.cc.
#include "evidence/trace_checker.h"

#include <algorithm>
#include <tuple>

#include "comm/topology.h"

namespace sp::evidence::trace_detail {
using comm::OpKind;
using comm::TraceRecord;
using nlohmann::json;

std::string ranks_text(const std::vector<int>& ranks) {
  if (ranks.size() == 1) return fmt::format("rank {}", ranks[0]);
  return fmt::format("ranks {}", fmt::join(ranks, ", "));
}

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

void Checker::add_value_mismatch(const std::string& kind, const std::string& group, const std::string& field,
                                 const std::vector<std::pair<int, std::string>>& values, int64_t seq, int64_t t_us,
                                 const std::string& where, const std::vector<int>& novel) {
  const std::vector<ValueGroup> vg = group_values(values);
  TraceMismatch m{.kind = kind, .group = group, .seq = seq, .field = field, .t_us = t_us};
  m.expected = fmt::format("{} on {}", vg[0].value, ranks_text(vg[0].ranks));
  std::vector<std::string> others;
  for (size_t i = 1; i < vg.size(); ++i) {
    others.push_back(fmt::format("{} on {}", vg[i].value, ranks_text(vg[i].ranks)));
    m.ranks.insert(m.ranks.end(), vg[i].ranks.begin(), vg[i].ranks.end());
  }
  // Without a majority (e.g. two ranks that disagree, the others killed before they recorded the op) the
  // group's own history decides: the ranks that issued an op the group never issued at an earlier step left
  // the sequence. Only when history cannot tell either are they all named.
  if (vg.size() > 1 && vg[0].ranks.size() == vg[1].ranks.size()) {
    m.ranks.insert(m.ranks.end(), vg[0].ranks.begin(), vg[0].ranks.end());
    if (!novel.empty() && novel.size() < values.size()) m.ranks = novel;
  }
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
  report_failures();
  // What the members disagree on comes before how the job ended: an op a rank failed inside or waited in
  // when the job was stopped follows from a disagreement, in whatever order the ranks died (issue 33: a rank
  // killed inside an op that the others completed was named before the rank that issued an extra one).
  const auto failure = [](const TraceMismatch& m) { return m.kind == "timed_out" || m.kind == "aborted"; };
  std::stable_sort(report_.mismatches.begin(), report_.mismatches.end(),
                   [&](const TraceMismatch& a, const TraceMismatch& b) {
                     return std::make_tuple(failure(a), a.t_us) < std::make_tuple(failure(b), b.t_us);
                   });
}

// Ops the watchdog stopped, and ops a rank failed inside.
void Checker::report_failures() {
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
}

}  // namespace sp::evidence::trace_detail
