// Comparing two runs' checksums.jsonl (`shardproof verify RUN --against REF`, the gate; docs/equivalence.md).
// Every record is read strictly and checked on its own first (types; count = numel; finite ⇔ nonfinite = 0;
// absmax ≤ l2 ≤ √numel·absmax and |sum| ≤ √numel·l2; a loss's bits are its value's), so an edited
// statistic is corruption, not a difference. Both files must hold exactly the expected records (every
// step × phase × tensor the contract implies, each once): a missing, extra or duplicated record makes
// the comparison `incomplete`, naming it. Records are aligned by (step, phase, tensor) and classified:
//   bitwise-equal      every digest and loss bit pattern equal, and then every statistic equal too
//                      (equal digests with different statistics is corruption);
//   within-tolerance   every statistic inside the class tolerances below (an L2 difference ≤ tol·l2,
//                      an absmax difference ≤ tol·l2, a sum difference ≤ tol·√numel·l2: each follows
//                      from ‖Δx‖₂ ≤ tol·‖x‖₂; count, numel and the non-finite count exactly equal);
//   divergent          the first record (in file order) outside them, with its statistics.
// The class a run must reach is the contract's promise (CompareSpec::promised), not what it happened to
// achieve: a bitwise promise fails at the first differing bit. The loss scaler's records (fp16: the scale
// and the skip of each step) are exact under every promise: any difference is out of class.
// Tolerances (relative), derived in docs/equivalence.md from fp32 rounding (u = 2^-24): reductions of
// length K ≤ 4096 in another order differ by ≲ √K·u ≤ 64u each, four on a gradient's path compose to
// ≤ 2^-16 ≈ 1.5e-5 — the loss, the parameters, and the gradients of a step that starts from identical
// parameters; gradients after parameters have started to differ (free-running trajectories): 1e-3.
// Anchored comparison (docs/equivalence.md §anchored) starts every compared step from the reference's
// state, so the single-step tolerances hold at every step.
#pragma once

#include <compare>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace sp::evidence {

struct Tolerances {
  double loss = 1.52587890625e-05;  // 2^-16
  double param = 1.52587890625e-05;
  double grad_first = 1.52587890625e-05;
  double grad_later = 1e-3;
};

// kDivergentByDesign: a promise only (plan/promise.h): a configuration outside the equivalence
// guarantee (bounded staleness, docs/ps.md §SSP); a run of it is reported as such, never as a pass. As a
// promise it is the weakest (the order is used by std::max over promises).
enum class Equivalence { kBitwise, kWithinTolerance, kDivergent, kIncomplete, kDivergentByDesign };
// "bitwise-equal", "within-tolerance", "divergent", "incomplete", "divergent-by-design"
const char* equivalence_name(Equivalence e);

struct RecordKey {
  int64_t step = 0;
  std::string phase;   // "loss", "scaler" (fp16), "grad", "param"
  std::string tensor;  // HF name, "loss", or "loss_scaler"
  auto operator<=>(const RecordKey&) const = default;
  std::string to_string() const;  // "step 4 grad model.layers.0.mlp.up_proj.weight"
};

// One checksums.jsonl record (docs/formats/checksums.md), validated on its own.
struct ChecksumRecord {
  RecordKey key;
  // tensors
  int64_t numel = 0, count = 0, nonfinite = 0;
  std::string digest;
  double l2 = 0, sum = 0, absmax = 0;  // NaN when recorded as null (non-finite data)
  bool finite = true;
  // loss
  double value = 0;
  std::string bits;
  // scaler (fp16): the loss scale the step ran with, and whether the step was skipped (an overflow)
  double scale = 0;
  bool skipped = false;
};
// Reads `path` strictly: every line a valid record (errors name file:line and the field or rule).
Result<std::vector<ChecksumRecord>> read_checksums(const std::string& path);

struct Divergence {
  int64_t step = -1;
  std::string phase, tensor;
  std::string got_digest, want_digest;
  double got_l2 = 0, want_l2 = 0, abs_l2 = 0, rel_l2 = 0;  // for tensors; for the loss: value and difference
  double abs_sum = 0, abs_absmax = 0;
  double tolerance = 0;
  std::string reason;  // what broke the class ("L2 outside tolerance", "sum outside ...", "digest differs", ...)
  nlohmann::json to_json() const;
  std::string to_string() const;
};

// One aligned record as compare_checksums judged it (CompareSpec::keep_records). `diff` names it and,
// unless bit-identical, holds its relative difference, the tolerance that applied and, when it left the
// promised class, the reason.
struct RecordDifference {
  Divergence diff;
  bool bitwise = false;  // digest (a loss: bit pattern) equal
  bool judged = false;   // at a judged step (CompareSpec::judged_steps); the others only add to the drift
  bool out_of_class() const { return !diff.reason.empty(); }
};

// (Every member has a default initializer so that designated initializers name only what they set.)
struct CompareSpec {
  Tolerances tol = {};
  Equivalence promised = Equivalence::kBitwise;  // kBitwise or kWithinTolerance
  // The records both files must hold, each exactly once (from the contract). Empty: both must hold the
  // same set.
  std::vector<RecordKey> expected = {};
  // The records the reference must hold (its own contract's); empty: `expected`. Only the keys both
  // hold are compared (an anchored replay holds its anchors' steps of the reference's full set).
  std::vector<RecordKey> reference_expected = {};
  bool anchored = false;  // every step starts from the reference's state: single-step tolerances throughout
  // The steps judged against the promise (empty: every step). The others only add to the drift: a
  // free-running run whose promise is not bitwise is verified at step 0, where it starts from the
  // reference's own state, and its later steps show how far the trajectories drift (information).
  std::vector<int64_t> judged_steps = {};
  // false: compare only the records the run holds (a fault run that stopped early; first divergence).
  bool require_complete = true;
  // true: Comparison::record_differences lists every aligned record as judged (the report's per-tensor series).
  bool keep_records = false;
};

struct Comparison {
  Equivalence verdict = Equivalence::kBitwise;
  Equivalence promised = Equivalence::kBitwise;
  int64_t expected = 0;  // records each side had to hold
  int64_t records = 0;   // records judged against the promise
  int64_t bitwise_records = 0;
  std::vector<std::string> problems;  // incomplete: missing, extra, duplicated or inconsistent records (first few)
  int64_t problem_count = 0;
  std::vector<Divergence> first_mismatch;  // first record not bitwise equal (empty if all are)
  std::vector<Divergence> divergence;      // first record outside the promised class (empty if none)
  double max_rel_loss = 0, max_rel_param = 0, max_rel_grad_first = 0, max_rel_grad_later = 0;
  // Later steps at which records leave the promised class (propagation), record count per step.
  std::vector<std::pair<int64_t, int64_t>> divergent_per_step;
  // Per step (judged or not): the largest relative L2 (or loss) difference of any record (the drift).
  std::vector<std::pair<int64_t, double>> drift_per_step;
  double max_loss_drift = 0;  // the largest relative loss difference at any step (judged or not)
  Divergence max_drift{};     // the record with the largest relative difference (its step, phase and tensor)
  std::vector<RecordDifference> record_differences;  // CompareSpec::keep_records: every aligned record, in file order
  // The promised class was reached (a bitwise promise is never met by a within-tolerance result).
  bool holds() const { return verdict == Equivalence::kBitwise || verdict == Equivalence::kWithinTolerance; }
  std::string describe() const;  // one line: verdict, counts, max differences, the first problem
  nlohmann::json to_json() const;
};

// Compares `run` against `reference` (both checksums.jsonl paths). An unreadable file or a malformed
// record is an error; a missing or extra record is an `incomplete` verdict.
Result<Comparison> compare_checksums(const std::string& run, const std::string& reference,
                                     const CompareSpec& spec = {});

}  // namespace sp::evidence
