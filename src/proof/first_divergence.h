// The first divergence of a fault run (docs/prove.md §first divergence): every evidence view is asked
// when it first saw the fault stage differ from the reference (or from the plan); the earliest
// (step, point within the step) wins, ties to the view listed first. The gate's fault criterion
// requires that it is the catalogue's expected view at the injected step and rank (docs/faults.md).
// Not the views' own comparisons (evidence/: trace checker, checksum and activation comparison).
// Invariant: a pure function of the bundle's bytes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/run_config.h"
#include "evidence/compare.h"
#include "evidence/faults.h"
#include "proof/bundle.h"

namespace sp::proof {

// One evidence view's verdict on the fault run.
struct Detection {
  evidence::View view = evidence::View::kJob;
  bool recorded = true;  // the bundle holds this view's evidence
  bool found = false;    // it saw a difference from the reference (or from the plan)
  int64_t step = -1;
  std::string phase = {};       // trace phase, checksum phase (loss/grad/param), "replicas", "checkpoint", ...
  int point = 0;                // where in a step the view observes (docs/prove.md §first divergence)
  std::vector<int> ranks = {};  // world ranks named, when the view can name them
  std::string tensor = {};
  std::string detail = {};
  std::string evidence = {};  // file(s), relative to the bundle
  nlohmann::json to_json() const;
};

struct FirstDivergence {
  std::vector<Detection> views;  // every view, in catalogue order
  int first = -1;                // index into views of the earliest detection; −1: nothing diverged
  std::vector<std::pair<int64_t, int64_t>> propagation;  // (step, checksum records out of class)
  const Detection* earliest() const { return first < 0 ? nullptr : &views[static_cast<size_t>(first)]; }
  nlohmann::json to_json() const;
  std::string line() const;  // "first divergence: checksums, step 4, grad, layers.1.attn.q_proj.weight ..."
};

// What the checksum and activation views of the fault run compare (the next comment says why): the run
// read (`numbers`: fault/, or fault-anchored/ when replayed), what it is read against (reference/, or
// parallel/ for a free-running non-bitwise fault run) and how (spec: the class, tolerances, records).
struct FaultReading {
  evidence::RunPaths numbers, against;
  std::string_view numbers_stage, against_stage;
  bool replayed = false;  // the anchored fault replay, within the single-step tolerances
  evidence::CompareSpec spec;
};
FaultReading fault_reading(const ProofBundle& bundle, const config::RunConfig& config, bool bitwise,
                           const evidence::Tolerances& tol);

// The fault run against the reference. `bitwise` is the class the contract promises. Bitwise
// configurations compare DIR/fault with DIR/reference bit for bit. The others separate the fault from
// the drift of their trajectories (docs/equivalence.md §anchored): the checksum and activation views read
// the anchored fault replay (DIR/fault-anchored: every replayed step starts from the reference's state)
// within the single-step tolerances, and the views of a free-running run (eval, and the checksums of a
// fault with no replay, such as a damaged checkpoint) compare DIR/fault with the clean parallel run of
// the same topology, DIR/parallel, bit for bit.
FirstDivergence locate_first_divergence(const ProofBundle& bundle, const config::RunConfig& config, bool bitwise,
                                        const evidence::Tolerances& tol = {});

}  // namespace sp::proof
