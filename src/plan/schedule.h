// Pipeline schedules as data: the ordered list of forward/backward actions one pipeline rank runs
// in one step. The runner (pipeline.h) turns each action into receives, compute and sends, so a
// schedule is tested without MPI and the ledger model replays the same list to predict memory.
//   GPipe (Huang et al. 2019): all m forwards, then all m backwards.
//   1F1B (PipeDream-flush, Narayanan et al. 2021): p − r − 1 warm-up forwards, then alternate one
//     forward and one backward, then cool-down backwards; at most p − r micro-batches in flight.
//   Interleaved 1F1B (Narayanan et al. SC'21 §2.2): v chunks per rank, forwards cycle through chunks
//     in groups of p micro-batches; warm-up (p − r − 1)·2 + (v − 1)·p, as Megatron-LM.
// Invariant (needed for bitwise equivalence): on every chunk, backwards run in micro-batch order
// 0..m−1, so gradient leaves reach the canonical accumulator in index order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/run_config.h"

namespace sp::plan {

struct PipeAction {
  bool forward = true;
  int virtual_stage = 0;    // chunk j of this rank
  int64_t micro_batch = 0;  // local index 0..m−1
  bool operator==(const PipeAction&) const = default;
};

std::vector<PipeAction> schedule_actions(config::Schedule schedule, int pp_rank, int pp, int virtual_stages, int64_t m);
// "F0.0 F0.1 B0.0 ..." (F<stage>.<mb>) for logs and tests.
std::string schedule_string(const std::vector<PipeAction>& actions);
// Most activation slots live at once on each virtual stage while running `actions`.
std::vector<int64_t> peak_in_flight(const std::vector<PipeAction>& actions, int virtual_stages);

}  // namespace sp::plan
