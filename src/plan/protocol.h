// The proof protocol's parameters (docs/prove.md §"The four stages"), derived from a run configuration the
// same way for `shardproof prove` and `lab run`: the recovery checkpoint step k, stage 3's fault with
// its step resolved, and stage 3's configuration. Validated before any stage starts, so a fault the
// run cannot express is refused up front instead of passing unnoticed.
// Not the driver (cli/cmd_prove.cc launches the stages).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "config/run_config.h"
#include "core/status.h"
#include "evidence/faults.h"

namespace sp::plan {

struct ProtocolPlan {
  int64_t checkpoint_step = 0;     // k: prove.checkpoint_step, default train.steps / 2
  evidence::FaultSpec fault;       // stage 3's fault; without @STEP it acts at k (a checkpoint fault: k − 1)
  config::RunConfig fault_config;  // stage 3's configuration (a checkpoint fault saves every k steps)
  // A configuration whose promise is not bitwise is verified by anchored replays (docs/equivalence.md
  // §anchored): these steps are replayed on the parallel topology from the reference's state, with and
  // without the fault. Empty for bitwise configurations.
  std::vector<int64_t> anchors;
  std::vector<int64_t> fault_anchors;          // the fault replay's (anchors ≥ fault_warmup)
  int64_t fault_warmup = 0;                    // the fault replay starts this many steps earlier (FaultInfo::history)
  std::vector<int64_t> reference_checkpoints;  // states the reference saves for the replays
  // The clean replay also evaluates the held-out split from the reference's state at these evaluation points
  // (s: the eval after step s, from the reference's checkpoint s + 1; −1: the initial one), on the parallel
  // topology: the eval of a non-bitwise class is verified from the reference's state, like every anchored step
  // (docs/equivalence.md §anchored). Every eval point of runs with up to 32 of them, else 32 evenly spaced and
  // the last; empty without an eval split (train.eval_batches = 0).
  std::vector<int64_t> anchored_evals;
};

// `fault_spec`: NAME[@STEP][:RANK], or empty for the configuration's prove.fault, else the default
// fault of the topology (evidence::default_fault_name).
Result<ProtocolPlan> plan_protocol(const config::RunConfig& config, std::string_view fault_spec);

}  // namespace sp::plan
