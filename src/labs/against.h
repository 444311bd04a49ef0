// What a learner's variation changed, against the lab's own run: `lab run KEY --set ... --against DIR`
// (docs/labs.md). Both directories are proof bundles; only their parallel/ runs are read: memory per category
// (rank 0's measured peaks, parallel/ledger.json), payload bytes per group kind at step 1 (rank 0's trace),
// the measured pipeline bubble (evidence/bubble.h) and the median tokens/s of steps ≥ 1 (metrics.jsonl).
// Reads only; a figure one side lacks is shown as "–".
#pragma once

#include <string>

#include "core/status.h"

namespace sp::labs {

// kInvalidArgument naming DIR when it holds no proof bundle's parallel run (checked before a run starts).
Status check_against_dir(const std::string& dir);

// The table "figure: theirs → mine (change)" of the two bundles, MiB for bytes.
std::string lab_against_text(const std::string& mine, const std::string& theirs);

}  // namespace sp::labs
