// The rounding probe of a bf16 autocast recording (python/shardproof_torch/probe.py, contract precision.probe;
// docs/equivalence.md §8): at a step, the first rows of micro-batch 0's input to layer 0's q_proj (fp32) and of its
// output (bf16, widened). Autocast computes that output as the bf16 rounding (to nearest even) of an fp32 sum of
// exact products of the bf16 roundings of input and weight, so the judge redoes it from the same inputs — the
// recorded input and the replayed weight, bit for bit the run's — with the exact sum (in double) and the worst-case
// fp32 summation error γ_K·Σ|x·w| (Higham, any order, FMA or not):
//  - wrong: an output outside the bf16 roundings of [exact − bound, exact + bound] (or not a bf16 number), which no
//    fp32 summation of these products gives: a FAIL, never by chance;
//  - flips: outputs one bf16 ulp from the rounding of the exact sum. Each rounding of the sum moves it by at most u·S
//    (u = 2^-24, S = Σ|x·w|), so with K − 1 of them the error has a standard deviation ≤ √((K−1)/3)·u·S; an element
//    at distance d from a rounding boundary flips with probability ≤ ½·erfc(d/(σ√2)) under that model, and the
//    count over all elements exceeds its expectation E by Chernoff's bound with probability ≤ 2^-20 at
//    t = E + c/2 + √(c²/4 + 2cE), c = 20·ln 2. More flips FAIL: the statistic, ≈ √K·2^-16 per element.
// Not the recording's reader (judge/recording.h) and not a view (judge/criteria_declared.cc: the rounding row).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "judge/recording.h"

namespace sp::judge {

struct ProbeCheck {
  bool recorded = false;                                     // a probe file exists for the step
  int rank = -1;                                             // the rank that wrote it
  int64_t elements = 0, flips = 0, boundary = 0, wrong = 0;  // boundary: where the bound allows two roundings
  double expected = 0, threshold = 0;                        // the model's expected flips and the FAIL threshold
  std::string first_wrong = {};                              // "row 3, output 17: 0.1234 where ... allow ..."
};

// The probe of `step` checked against the weight of the probed module (the replayed state before the step: logical
// [out, in]); not recorded when no rank wrote one. Refuses (exit 2) a probe file of other shapes or dtypes.
Result<ProbeCheck> check_probe(const Recording& recording, int64_t step, const std::vector<float>& weight);

// The bf16 number nearest to x (ties to even), as a double.
double bf16_round(double x);
// One recorded output `v` (of probe row `row`, column `col`) against its K inputs' bf16 values (as doubles) and
// weights': counted into `out` (elements, boundary, wrong with the first one's text, flips, expected).
void check_output(const double* xb, const double* wb, int64_t K, float v, int64_t row, int64_t col, ProbeCheck& out);
// The flips above which a count whose model expectation is `expected` FAILs (Chernoff: by chance ≤ 2^-20).
double flip_threshold(double expected);

}  // namespace sp::judge
