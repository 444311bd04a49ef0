// The fixed staleness schedule of the bounded-staleness parameter server (SSP, docs/ps.md §SSP): which
// parameter version each worker computes each step on, and the staleness histogram of a run. Pure
// arithmetic, shared by the parameter server (parallel/parameter_server.h), its single-process replay
// (parallel/ssp_replay.h), the fault catalogue (evidence/faults.cc) and the evidence checks, so none
// can disagree. Not the free-running mode (not built).
// Schedule: worker w computes step t on version v_w(t) = max(0, t − ((t + w) mod (s + 1))), version k
// being the parameters after k updates. Worker w refreshes its replica (takes the pull) before the
// steps t with (t + w) mod (s + 1) = 0 and keeps its cached copy otherwise, so its staleness t − v_w(t)
// cycles through 0, 1, …, s (every value of the bound is exercised), staggered by w across workers.
// Invariant: 0 ≤ t − v_w(t) ≤ s, and v_w is non-decreasing in t. Reference: Ho et al., "More Effective
// Distributed ML via a Stale Synchronous Parallel Parameter Server", NIPS'13.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

namespace sp::comm {

// v_w(t): the version worker `worker` computes step `step` on under bound `staleness` (0: t, BSP).
int64_t stale_version(int64_t step, int worker, int staleness);
// Whether worker `worker` takes the pull after step `step` into its replica (its version for step + 1
// is step + 1), or keeps its cache.
bool refreshes_after(int64_t step, int worker, int staleness);

// Counts of applied gradients by staleness t − v (one gradient per worker per step).
using StalenessHistogram = std::map<int64_t, int64_t>;
void add_staleness(StalenessHistogram& h, int64_t step, const std::vector<int64_t>& versions);
// {"0": n0, "1": n1, ...}
nlohmann::json staleness_json(const StalenessHistogram& h);

}  // namespace sp::comm
