// The fault catalogue (docs/faults.md): one injected fault per run, `--fault NAME[@step][:rank]`.
// Each entry names what it breaks, the topology it needs, and the evidence view expected to catch
// it first; the protocol's stage 3 checks that the view did. This file and the engine's injector
// (parallel/fault_injector.h, which acts at named hook points of a step) are the only places that
// know individual faults: adding one means a catalogue row here and its action there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace sp::evidence {

enum class FaultKind {
  kNone,
  kSkipGradAllreduce,      // every rank skips the dp sync of one unit's gradients at `step`
  kStaleGrad,              // `rank` does not zero its gradient leaves at `step`: last step's values leak in
  kWrongLossScale,         // `rank` scales by its micro-batch's token count instead of the global batch's
  kDropTpAllreduce,        // every tp rank skips the forward all-reduce after o_proj of the first block
  kPpMicrobatchSwap,       // the last pipeline stage pairs micro-batches 0 and 1 with each other's targets
  kZero3StaleParam,        // `rank` serves its pre-update shard of one unit in the step's ZeRO-3 gathers
  kDesyncExtraCollective,  // `rank` issues one extra all-reduce on the world group
  kRankCrash,              // `rank` kills itself (SIGKILL) in the middle of the step
  kCkptBitflip,            // one bit of a committed checkpoint shard is flipped after the save
  kCkptTruncate,           // a committed checkpoint shard loses its last byte
  kCkptMissingShard,       // a committed checkpoint shard is deleted
  kDataOrder,              // `rank` draws its micro-batches with another seed at `step`
  kNanInjection,           // `rank` puts a NaN into its first micro-batch's gradient at `step`
  kTpGradScale,  // `rank` scales its tensor-parallel shard of the first block's o_proj gradient by 1 + 2^-7 (2^-2
                 // mixed)
  // Parameter server (docs/ps.md): `rank` a server for the first and last, a worker for the second.
  kPsDropPush,    // server `rank` drops worker 0's push at `step` (worker 0 does not send it)
  kPsStalePull,   // worker `rank` keeps its replica instead of taking the pull it must take after `step`
  kPsApplyTwice,  // server `rank` applies its optimizer update twice at `step`
  // Sequence parallelism: every tp rank skips the sums of the replicated norm weights' gradients over the tp
  // group at `step` (each keeps its own tokens' share: Megatron's most reported SP bug).
  kDropSpNormGradReduce,
  // Under ZB-H1 (the backward split into B and W), `rank` drops the W pass of its first micro-batch at `step`
  // (that micro-batch's weight gradients never reach the sum), or runs it twice (they are added twice).
  kZbDropW,
  kZbRepeatW,
};

// The views of the evidence, in the order they observe a step (docs/faults.md).
enum class View {
  kTraceConsistency,
  kTraceVsPrediction,
  kActivations,
  kChecksums,
  kReplicas,
  kCheckpoint,
  kEval,
  kJob
};
std::string_view view_name(View v);

// Where a fault acts and where it shows: the views can name the injected rank only for kOneRank.
enum class Reach {
  kOneRank,         // acts on world rank `rank`; its evidence names that rank
  kOneRankSpreads,  // acts on `rank`, but every rank's evidence carries it (a stale ZeRO-3 shard is gathered by all)
  kEveryRank,       // acts on every rank (`rank` ignored)
};

struct FaultInfo {
  FaultKind kind;
  std::string_view name;
  std::string_view breaks;       // one line: what goes wrong
  View expected_view;            // the view that must catch it first
  std::string_view expectation;  // what the catching view reports
  std::string_view needs;        // topology requirement, e.g. "dp > 1"
  Reach reach = Reach::kOneRank;
  bool checkpoint = false;  // damages a committed checkpoint after the save of `step` (not the training)
  int history = 0;          // steps before `step` the fault needs to have run (an anchored replay starts there)
};
const std::vector<FaultInfo>& fault_catalogue();
const FaultInfo& fault_info(FaultKind kind);

struct FaultSpec {
  FaultKind kind = FaultKind::kNone;
  int64_t step = 1;  // default: the second step, so that step 0 proves the clean state
  int rank = 0;      // world rank (for faults on one rank)
  std::string to_string() const;
  bool any() const { return kind != FaultKind::kNone; }
  // The hook sites' question: does this fault act at `step` on world rank `rank`? Faults that act on
  // every rank (Reach::kEveryRank) ignore `rank`.
  bool fires(FaultKind k, int64_t at_step, int at_rank) const;
};

bool is_checkpoint_fault(FaultKind kind);
// The fault `prove` injects when none is named: the first the topology can express, in the order the
// mission lists the classic silent errors (skip-grad-allreduce, drop-tp-allreduce, pp-microbatch-swap,
// stale-grad).
// A parameter-server run (servers > 0): ps-drop-push.
std::string_view default_fault_name(int dp, int tp, int pp, int servers = 0);

// "skip-grad-allreduce@3:1" → kind, step 3, rank 1. Errors list the catalogue.
Result<FaultSpec> parse_fault(std::string_view text);
// What a fault needs to know of the run it acts on.
struct FaultTarget {
  int dp = 1, tp = 1, pp = 1, zero = 0;
  int world = 1;
  int servers = 0;    // parameter-server ranks (world ranks world − servers … world − 1); 0: all-reduce
  int staleness = 0;  // parallel.staleness
  int64_t steps = 1;
  int64_t micro_batches = 1;       // M per step
  int64_t checkpoint_every = 0;    // evidence.checkpoint_every
  bool sequence_parallel = false;  // parallel.sequence_parallel
  // Per world rank: whether it runs W passes (plan::splits_backward: under parallel.schedule = "zb-h1" the
  // pipeline ranks ≥ 1; pipeline rank 0 runs W(k) right after B(k), i.e. full backwards). Every rank false: no W pass.
  std::vector<bool> weight_passes;
};
// The rank a fault acts on when `--fault` names none: the first server for the server faults, worker 1 for
// ps-stale-pull (worker 0 is the replicas' reference), the first rank with W passes for zb-drop-w and
// zb-repeat-w, else 0.
int default_fault_rank(FaultKind kind, const FaultTarget& run);
// Refuses a fault the run cannot express ("drop-tp-allreduce needs tp > 1; this run has tp = 1"),
// identically on every rank before any communication.
Status check_fault_applicable(const FaultSpec& f, const FaultTarget& run);

// ckpt-bitflip / ckpt-truncate / ckpt-missing-shard: damages world rank `fault.rank`'s shard in the
// committed checkpoint directory `step_dir`, as a disk or a careless operator would. A rank that saved
// no shard leaves nothing to damage (a warning, not an error).
Status damage_checkpoint(const FaultSpec& fault, const std::string& step_dir);

}  // namespace sp::evidence
