// The equivalence of a run to a reference, as its contract promises it (docs/equivalence.md):
// the two contracts must be comparable (equal up to topology and evidence settings: otherwise "not
// comparable: config.train.seed: 99 ≠ 1234"); the class the run must reach is its configuration's
// promise (plan/promise.h: bitwise for DP, ZeRO, PP and their hybrids in deterministic mode; within
// tolerance with tensor parallelism or fast reductions), not what it achieved; and both checksum files
// must hold every record the contract implies. A run whose promise is not bitwise is verified per
// step only where its step started from the reference's state: its step 0 (the same initialization),
// or every step of an anchored replay (anchors.json, `train --anchor-from`). Later free-running steps
// are compared for information: how far the trajectories drift.
// Used by `verify RUN --against REF` and by the gate (criteria.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/run_config.h"
#include "core/status.h"
#include "evidence/bundle_paths.h"
#include "evidence/compare.h"

namespace sp::proof {

// A run bundle's contract and the configuration in it (the hash verified).
struct RunContract {
  nlohmann::json contract;
  config::RunConfig config;
};
Result<RunContract> read_run_contract(const evidence::RunPaths& run);

// "not comparable: config.train.seed: 99 ≠ 1234" unless equal up to topology and evidence settings.
Status check_comparable(const RunContract& run, const RunContract& reference, const std::string& run_label,
                        const std::string& reference_label);

// The anchors of an anchored replay (anchors.json), or empty for a free-running run.
struct AnchorSet {
  std::vector<int64_t> steps;
  int64_t warmup = 0;
};
Result<AnchorSet> read_anchors(const evidence::RunPaths& run);

struct RunEquivalence {
  evidence::Comparison comparison;  // judged at the steps that started from the reference's state
  bool anchored = false;
  // Both runs of one contract on one topology (config.parallel, also of every checkpoint they resumed from):
  // held to bitwise equality whatever the class, since the engine is deterministic (same contract, same bits).
  bool same_topology = false;
  // A bounded-staleness run against a run of another schedule (the reference): the comparison ran for
  // information (step 0 judged, later steps drift) and the verdict is divergent-by-design.
  bool by_design = false;
  std::string schedule;  // "W workers, staleness s" of the stale side, when by_design
  evidence::Equivalence step0 =
      evidence::Equivalence::kBitwise;  // by_design: step 0's class (every worker computes on version 0)
  int64_t judged_steps = 0;             // 0 = every step (a bitwise promise)
  int64_t steps = 0;                    // the contract's train.steps
  bool holds() const { return comparison.holds(); }
  // The run's steps that were not judged against the promise: a free-running run whose promise is not
  // bitwise is verified at step 0 only (its later steps drift, information only). A verdict never covers
  // them: `verify --against` exits 3 when the judged steps hold and these are left (docs/equivalence.md).
  int64_t unverified_steps() const { return anchored || judged_steps == 0 ? 0 : steps - judged_steps; }
  // "bitwise-equal (632 of 632 records)"; "within tolerance at every anchored step (30 of 30) ...";
  // "within tolerance at step 0 only (1 of 30 steps verified) ...; steps 1–29 NOT verified: drift ..."
  std::string describe() const;
};

// `run` against `reference`: comparable contracts, the promised class, complete records.
// `keep_records`: the comparison also lists every record as judged (CompareSpec::keep_records).
Result<RunEquivalence> compare_runs(const evidence::RunPaths& run, const evidence::RunPaths& reference,
                                    bool keep_records = false);

}  // namespace sp::proof
