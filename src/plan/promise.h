// What a run's configuration promises against the single-device reference (docs/equivalence.md), fixed
// before it starts: the equivalence class it must reach (from its configuration, never from what it achieved),
// the tolerances of a step that starts from the reference's state, and the checksum records its contract implies.
// Not the comparison of two runs' files against the promise (proof/equivalence.h, `verify --against`, the gate).
// Invariant: pure functions of the configuration, so that `prove` (protocol.h), `verify` and the gate derive one
// promise from one contract.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "config/run_config.h"
#include "evidence/compare.h"

namespace sp::plan {

// What the configuration promises against the single-device reference: divergent-by-design for bounded
// staleness (a parameter server with staleness > 0, or its single-process replay), which computes on
// stale parameters by design (docs/ps.md §SSP).
evidence::Equivalence promised_class(const config::RunConfig& config);
// The fixed staleness schedule a run follows, as (workers, staleness); nullopt for a synchronous run.
// Two runs of one schedule (the parameter server and its replay) promise bitwise equality to each other.
std::optional<std::pair<int, int>> stale_schedule(const config::RunConfig& config);

// The tolerances of a step that starts from the reference's state (docs/equivalence.md §3): 2^-16 for
// the loss and the parameters; a gradient is a sum over the N = global_batch·seq_len tokens of the step
// whose terms carry that relative error and whose signs cancel (its condition number is ≈ √N for
// uncorrelated signs), so its tolerance is 2^-16·√N.
evidence::Tolerances tolerances_for(const config::RunConfig& config);
// The 16-bit envelope τ₁₆ = 2·√R·u/√3 of two computations whose values pass R rounding points to the 16-bit dtype
// t (u = 2^-8 bf16, 2^-11 fp16; each point moves a value by a relative error uniform in ±u, RMS u/√3, independent
// points add in quadrature; docs/equivalence.md §5); 0 in fp32.
double rounding_envelope(DType t, double points);
// Of a mixed-precision run of the engine: R = 13·n_layers + 4, the engine's own rounding points.
double mixed_precision_envelope(const config::RunConfig& config);

// The checksum records a run of `config` writes for `steps` (every step when empty): the loss, the loss
// scaler's record in fp16, and every gradient and parameter tensor at the steps evidence.checksum_every
// selects.
std::vector<evidence::RecordKey> expected_records(const config::RunConfig& config,
                                                  const std::vector<int64_t>& steps = {});

}  // namespace sp::plan
