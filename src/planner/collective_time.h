// Collective time: the α–β cost of one collective or p2p transfer over a group whose link is known
// (planner/group_links.h). It is not NCCL's tuner: one algorithm per operation, no protocol choice, no
// per-call base latency, no overlap with compute (the caller states overlap). α = the hop latency,
// β = 1 / the hop bandwidth, n = group size, S = `bytes` as defined per op below:
//   all_reduce      ring:  2(n−1)·α + 2(n−1)/n · S·β      S = the buffer reduced (Thakur et al. 2005 §4; NCCL)
//   reduce_scatter  ring:   (n−1)·α +  (n−1)/n · S·β      S = the full input, n shards of S/n out
//   all_gather      ring:   (n−1)·α +  (n−1)/n · S·β      S = the full output, n shards of S/n in
//   all_to_all      pairwise exchange: (n−1)·α + (n−1)/n · S·β_a2a, S = one rank's send buffer, β_a2a from
//                   the rank's share of its node's NICs when the group crosses nodes
//   send_recv       one hop: α + S·β                       S = the message
// Invariant: every time is 0 for a group of one rank and grows linearly in S.
#pragma once

#include <string>
#include <vector>

#include "planner/group_links.h"

namespace sp::planner {

enum class Collective { kAllReduce, kReduceScatter, kAllGather, kAllToAll, kSendRecv };
std::string collective_name(Collective op);     // "all_reduce", ...
std::string collective_formula(Collective op);  // the line above, for the report's assumptions

double collective_seconds(Collective op, double bytes, const GroupLink& link);

// The α–β model's assumptions, one sentence each, printed with every report (docs/plan.md).
const std::vector<std::string>& time_model_assumptions();

}  // namespace sp::planner
