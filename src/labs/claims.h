// A lab's "what to observe" made checkable: each observation of configs/labs/catalogue.toml carries, next
// to its prose, one or more claims that this file evaluates against the bundle the lab wrote, so a note can
// no longer drift from the engine (docs/formats/labs.md §Claims; `shardproof lab check KEY DIR`).
// A claim is one line: QUANTITY OP VALUE, tokens separated by spaces.
//   count GLOB FILTER...          records of the JSON Lines files GLOB (relative to the bundle) that pass
//                                 every filter (a .json file is one record; GLOB#/POINTER: the elements of
//                                 the array at that JSON Pointer of each file; of an object: its members,
//                                 each with its name in the field _key)
//   sum GLOB FIELD FILTER...      Σ of FIELD over those records      max GLOB FIELD FILTER...   their largest
//   distinct GLOB FIELD FILTER... how many different values FIELD takes
//   value FILE POINTER            the JSON value at a JSON Pointer (/a/b/0) of FILE
//   differ A B FIELD FILTER...    records of A whose FIELD differs from (or is missing in) B's record with the
//                                 same (step, phase, tensor)
//   files GLOB                    how many files GLOB matches (none: the claim does not hold)
//   text FILE                     the file's text (with OP has / lacks and a phrase: the rest of the line)
//   idle_end_stage RUN            the pipeline stage with the longest idle after its last interval of a step,
//   idle_start_stage RUN          … before its first (RUN/timeline, topology.json; steps ≥ 1, mean over ranks)
//   Q1 / Q2                       the ratio of two numeric quantities
// FILTER: FIELD=VALUE, FIELD!=VALUE (VALUE may hold * and [..] wildcards; a number matches its JSON text),
// FIELD=* (present), !FIELD (absent). OP: == != < <= > >= (numbers compare as numbers, JSON values as JSON
// text; the value is the rest of the line, read as JSON if it parses, else as a string) and has / lacks
// (a string contains the rest of the line). Every claim has a negation (negated_claim), which must fail on the same
// bundle.
#pragma once

#include <string>
#include <vector>

#include "labs/catalogue.h"

namespace sp::labs {

struct ClaimResult {
  bool holds = false;
  std::string measured{};  // what the bundle holds, or why the claim could not be evaluated
};

// Evaluates one claim against the bundle directory `bundle`. A malformed claim, a missing file or a glob
// that matches nothing does not hold, with the reason in `measured`.
ClaimResult evaluate_claim(const std::string& bundle, const std::string& claim);

// The claim with its operator negated (== ↔ !=, < ↔ >=, > ↔ <=, has ↔ lacks); empty if it has none.
std::string negated_claim(const std::string& claim);

// Every claim of every observation of `lab` against `bundle`: one line per observation (ok / FAIL, its
// prose, then each claim with what was measured). `failed` receives the number of claims that do not hold,
// `total` the number evaluated.
std::string lab_claims_text(const Lab& lab, const std::string& bundle, int& failed, int& total);

}  // namespace sp::labs
