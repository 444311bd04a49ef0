// Pipeline simulation: the step's pipeline phase timed by replaying the engine's own schedule
// (plan/schedule.h, the same action lists the pipeline runner executes) with given durations, instead
// of trusting the closed-form bubble. It is not the engine: no data, no MPI; an action starts when its
// rank is free and its input has arrived.
//   F(c, mb) on the rank holding chunk c waits for F(c−1, mb) to finish plus one transfer;
//   B(c, mb) waits for B(c+1, mb) to finish plus one transfer (the last chunk's for its own F);
//   under ZB-H1, W(c, mb) waits for its own B(c, mb), and B and W split the backward's time (weight_s);
//   every rank runs its actions in schedule order, one at a time.
// Sends are taken as asynchronous (the sender does not wait for the receiver); the engine's blocking
// sends can only lengthen the step, which docs/plan.md §time names among the causes of error.
// Invariant: with zero transfer time and equal durations the simulated bubble equals the closed form
// (p−1)/(v·m+p−1) for GPipe, 1F1B and interleaved 1F1B, and with B = W = F the ZB-H1 form (p−1)/(3m+p−1)
// (tests/unit/plan_pipeline_sim_test.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "config/run_config.h"

namespace sp::planner {

struct PipelineTimes {
  config::Schedule schedule = config::Schedule::k1F1B;
  int pp = 1;
  int virtual_stages = 1;          // v
  int64_t micro_batches = 1;       // m, per dp rank per step
  std::vector<double> forward_s;   // per global chunk c = j·pp + r: one micro-batch's forward
  std::vector<double> backward_s;  // per global chunk: one micro-batch's backward (recompute included)
  // ZB-H1: per global chunk, the part of backward_s that is its W pass (weight gradients); B takes the rest.
  // Empty: half of backward_s (each linear's dW costs its dX; docs/plan.md).
  std::vector<double> weight_s;
  double transfer_s = 0;  // one activation or gradient transfer between adjacent chunks
  bool record = false;    // keep every action's interval (PipelineSimulation::actions)
};

// One simulated action: chunk c = virtual_stage · pp + rank ran micro-batch `micro_batch` in [start, end).
struct SimulatedAction {
  int rank = 0, virtual_stage = 0;
  int64_t micro_batch = 0;
  bool forward = true;
  double start_s = 0, end_s = 0;
  bool weight = false;  // a ZB-H1 W pass (a backward otherwise)
};

struct PipelineSimulation {
  double makespan_s = 0;       // first action's start to the last action's end, over all ranks
  std::vector<double> busy_s;  // per pp rank: the sum of its actions' durations
  // 1 − mean busy / makespan: the fraction of the pipeline phase a rank spends waiting.
  double bubble_fraction = 0;
  std::vector<SimulatedAction> actions;  // per rank in schedule order, when PipelineTimes::record
};

PipelineSimulation simulate_pipeline(const PipelineTimes& t);

}  // namespace sp::planner
