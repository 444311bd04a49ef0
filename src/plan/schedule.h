// Pipeline schedules as data: the ordered list of forward/backward actions one pipeline rank runs
// in one step. The runner (pipeline.h) turns each action into receives, compute and sends, so a
// schedule is tested without MPI and the ledger model replays the same list to predict memory.
//   GPipe (Huang et al. 2019): all m forwards, then all m backwards.
//   1F1B (PipeDream-flush, Narayanan et al. 2021): p − r − 1 warm-up forwards, then alternate one
//     forward and one backward, then cool-down backwards; at most p − r micro-batches in flight.
//   Interleaved 1F1B (Narayanan et al. SC'21 §2.2): v chunks per rank, forwards cycle through chunks
//     in groups of p micro-batches; warm-up (p − r − 1)·2 + (v − 1)·p, as Megatron-LM.
//   ZB-H1 (zero bubble, Qi et al. 2023 §3.1): each backward split into B (input gradient) and W (weight
//     gradient); 1F1B's order of F and B, with rank r deferring its W passes by r micro-batches: W of
//     micro-batch k − r follows B of k, the last r run after the cool-down, where they fill 1F1B's drain
//     bubble. Rank 0 (lag 0, nothing sent upstream) runs B(k)·W(k) as one full backward: 1F1B's rank 0.
//     Every rank holds at most min(p, m) micro-batches between F and W (1F1B's rank 0 peak); with
//     equal F, B and W times and m ≥ p the bubble is (p − 1)/(3m + p − 1) (docs/compare.md §Bubble).
// Invariant (needed for bitwise equivalence): on every chunk, backwards (under ZB-H1: W passes, which
// alone touch the gradients) run in micro-batch order 0..m−1, so gradient leaves reach the canonical
// accumulator in index order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/run_config.h"

namespace sp::plan {

// What a backward action computes: the whole backward (GPipe, 1F1B, interleaved), or one half of it under
// ZB-H1: B, the input gradients (what the previous stage waits for), or W, the weight gradients.
enum class BackwardPass { kFull, kInput, kWeight };

struct PipeAction {
  bool forward = true;
  int virtual_stage = 0;                    // chunk j of this rank
  int64_t micro_batch = 0;                  // local index 0..m−1
  BackwardPass pass = BackwardPass::kFull;  // backward actions only
  bool operator==(const PipeAction&) const = default;
  bool weight() const { return !forward && pass == BackwardPass::kWeight; }
  // A backward that sends the input gradient upstream (a full backward or B).
  bool input_grad() const { return !forward && pass != BackwardPass::kWeight; }
  // The action after which the micro-batch's activation slot is free (a full backward or W).
  bool frees_slot() const { return !forward && pass != BackwardPass::kInput; }
};

std::vector<PipeAction> schedule_actions(config::Schedule schedule, int pp_rank, int pp, int virtual_stages, int64_t m);
// Whether a rank running `actions` splits its backward into B and W passes (ZB-H1's ranks ≥ 1): the one
// predicate by which the engine builds its stages (StageSpec::split_backward), the ledger model replays them
// and a fault on W passes (zb-drop-w, zb-repeat-w) finds a rank to act on.
bool splits_backward(const std::vector<PipeAction>& actions);
// "F0.0 F0.1 B0.0 ... W0.0" (F<stage>.<mb>) for logs and tests.
std::string schedule_string(const std::vector<PipeAction>& actions);
// Most activation slots live at once on each virtual stage while running `actions` (a slot lives from
// its forward to its full backward, or to its W pass under ZB-H1).
std::vector<int64_t> peak_in_flight(const std::vector<PipeAction>& actions, int virtual_stages);

}  // namespace sp::plan
