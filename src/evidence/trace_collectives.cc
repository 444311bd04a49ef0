// What the members of a group must agree on (trace_checker.h): every collective compared position by
// position (the fields of collective_fields, the all_to_all count matrix, the payload digests that must
// agree), and every p2p send paired with its receive per (sender, receiver, tag) in order.
#include <algorithm>

#include "evidence/trace_checker.h"

namespace sp::evidence::trace_detail {

using comm::OpKind;
using comm::TraceRecord;

namespace {

// An op as the group issues it, step aside: what recurs from step to step at the same point.
std::string op_signature(const TraceRecord& r) {
  std::string s;
  for (const Field& f : collective_fields())
    if (std::string_view(f.name) != "step") s += f.value(r) + "|";
  return s;
}

// Collectives that complete on a member only after every member joined (a rooted broadcast or reduce may
// complete on one member before another has joined).
bool completes_after_all_join(OpKind op) {
  return op == OpKind::kAllReduce || op == OpKind::kAllGather || op == OpKind::kAllToAll ||
         op == OpKind::kReduceScatter || op == OpKind::kBarrier;
}

// The ranks whose collective #i has a signature that no member issued at an earlier step.
std::vector<int> novel_ranks(const std::vector<std::pair<int, std::vector<const TraceRecord*>>>& parts, size_t i) {
  std::vector<int> out;
  for (const auto& [w, colls] : parts) {
    if (i >= colls.size()) continue;
    const std::string sig = op_signature(*colls[i]);
    bool seen = false;
    for (const auto& [v, other] : parts)
      for (size_t j = 0; j < std::min(i, other.size()) && !seen; ++j)
        seen = other[j]->step < colls[i]->step && op_signature(*other[j]) == sig;
    if (!seen) out.push_back(w);
  }
  return out;
}

}  // namespace

bool Checker::recorded_by_others_only(int w, const std::vector<std::pair<int, OpList>>& parts, size_t i) const {
  const TraceRecord* completed = nullptr;
  for (const auto& [v, colls] : parts)
    if (i < colls.size() && !colls[i]->aborted && !colls[i]->timed_out) completed = colls[i];
  if (completed == nullptr || !completes_after_all_join(completed->op) || !in_flight_at_stop(w, completed->step))
    return false;
  // Every copy is that op (a member may have failed inside it as the job went down, never waited it out).
  const std::string sig = op_signature(*completed);
  for (const auto& [v, colls] : parts)
    if (i < colls.size() && (colls[i]->timed_out || op_signature(*colls[i]) != sig)) return false;
  return true;
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
  std::set<int> killed_in;  // members whose missing tail is an op they joined but never recorded
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
        add_value_mismatch("field", name, f.name, values, first->seq, first->t_start_us, where, novel_ranks(parts, i));
        return;  // later positions are unreliable once the sequences diverge
      }
    }
    for (const auto& [w, colls] : parts) {
      if (i < colls.size() || killed_in.count(w) > 0) continue;
      if (recorded_by_others_only(w, parts, i)) {
        // Not the desync: the stopped job killed `w` inside this op (issue 33: LSL-K named dp rank 0
        // instead of the rank that issued an extra collective when rank 0 was the slowest to write).
        killed_in.insert(w);
        report_.warnings.push_back(fmt::format(
            "rank {}, group '{}': collective #{} (seq {}, step {}) completed on every member that recorded it, "
            "so rank {} joined it; the stopped job killed it before its record (not a mismatch)",
            w, name, i, first->seq, first->step, w));
        continue;
      }
      add_value_mismatch("missing_op", name, "op", ops, first->seq, first->t_start_us, where);
      report_.mismatches.back().message +=
          fmt::format("; rank {} issued {} collectives on this group", w, colls.size());
      return;
    }
    if (first->op == OpKind::kAllToAll) {
      // send_counts[b] on rank a must equal recv_counts[a] on rank b (group ranks).
      for (const auto& [wa, ca] : parts) {
        for (const auto& [wb, cb] : parts) {
          if (i >= ca.size() || i >= cb.size()) continue;  // a member killed inside it (killed_in)
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
        if (i < colls.size() && colls[i]->out_digest) digests.emplace_back(w, colls[i]->out_digest->hex());
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

}  // namespace sp::evidence::trace_detail
