// Comparing two runs' checksums.jsonl (`shardproof verify RUN --against REF`, docs/equivalence.md).
// Records are aligned by (step, phase, tensor). Classification:
//   bitwise-equal      every digest and every loss bit pattern equal;
//   within-tolerance   every difference inside the class tolerances below;
//   divergent          the first record (in file order) outside them, with its statistics.
// Tolerances (relative, on the exact L2 norm of a logical tensor or on the loss value), derived in
// docs/equivalence.md from fp32 rounding (u = 2^-24): reductions of length K ≤ 4096 in another order
// differ by ≲ √K·u ≤ 64u each, four on a gradient's path compose to ≤ 2^-16 ≈ 1.5e-5:
//   loss (every step), parameters (every step), gradients at the first compared step: 1.5e-5;
//   gradients after parameters have started to differ: 1e-3 (non-convex dynamics amplify rounding;
//   a real fault moves parameters and losses far beyond 1.5e-5, where it is caught).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace sp::evidence {

struct Tolerances {
  double loss = 1.52587890625e-05;        // 2^-16
  double param = 1.52587890625e-05;
  double grad_first = 1.52587890625e-05;
  double grad_later = 1e-3;
};

enum class Equivalence { kBitwise, kWithinTolerance, kDivergent };
const char* equivalence_name(Equivalence e);  // "bitwise-equal", "within-tolerance", "divergent"

struct Divergence {
  int64_t step = -1;
  std::string phase, tensor;
  std::string got_digest, want_digest;
  double got_l2 = 0, want_l2 = 0, abs_l2 = 0, rel_l2 = 0;  // for tensors; for the loss: value and difference
  double abs_sum = 0, abs_absmax = 0;
  double tolerance = 0;
  nlohmann::json to_json() const;
  std::string to_string() const;
};

struct Comparison {
  Equivalence verdict = Equivalence::kBitwise;
  int64_t records = 0;
  int64_t bitwise_records = 0;
  std::vector<Divergence> first_mismatch;  // first record not bitwise equal (empty if all are)
  std::vector<Divergence> divergence;      // first record outside tolerance (empty unless divergent)
  double max_rel_loss = 0, max_rel_param = 0, max_rel_grad_first = 0, max_rel_grad_later = 0;
  // Later steps at which tensors diverge (propagation), tensor count per step.
  std::vector<std::pair<int64_t, int64_t>> divergent_per_step;
  nlohmann::json to_json() const;
};

Result<std::vector<nlohmann::json>> read_jsonl(const std::string& path);
// Compares `run` against `reference` (both checksums.jsonl paths).
Result<Comparison> compare_checksums(const std::string& run, const std::string& reference, const Tolerances& tol = {});

// One aligned record of that comparison: its difference (rel_l2 against `tolerance`), whether it is
// bit-identical and whether it stays in class (finite like the reference, rel_l2 ≤ tolerance).
struct RecordDifference {
  Divergence diff;
  bool bitwise = false;
  bool within = false;
};
// Every record `compare_checksums` aligns, in `run`'s file order (the per-tensor error series of the
// report's divergence view); compare_checksums summarizes exactly these.
Result<std::vector<RecordDifference>> checksum_differences(const std::string& run, const std::string& reference,
                                                           const Tolerances& tol = {});

}  // namespace sp::evidence
