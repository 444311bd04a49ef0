// The gate: the verdict of the proof protocol (gate.json + summary.md, docs/prove.md §gate).
// A gate is a list of criteria, each with a measured value, a threshold, a pass flag and the evidence
// file it was derived from; it passes only if every required criterion passes. Throughput is
// reported as information and can never make a gate pass. derive_gate() evaluates the criteria table
// (criteria.h) on a bundle's files alone, so `shardproof verify DIR` re-derives the same gate for a
// third party that `prove` printed.
// Invariant: the verdict is a pure function of the bundle's bytes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "proof/first_divergence.h"

namespace sp::proof {

struct Criterion {
  std::string name;  // "traces consistent", ...
  bool passed = false;
  bool required = true;            // false: reported only (throughput)
  std::string measured;            // human-readable measured value
  std::string threshold;           // what it had to be
  std::string evidence;            // file(s) it comes from, relative to the bundle
  std::string detail;              // the first problem found, if any
  nlohmann::json to_json() const;  // gate.json's form of one criterion (docs/formats/gate.md)
};

struct Gate {
  std::vector<Criterion> criteria;
  bool passed() const;
  nlohmann::json to_json() const;
  // `lab` (prove.json "lab", null outside a lab): the key, section, mechanism and observations, each linked to
  // the report view that shows it, between the title and the verdict.
  std::string summary_markdown(const std::string& title, const std::vector<std::string>& notes,
                               const nlohmann::json& lab = nullptr) const;
  // The criteria table (criterion, result, measured, threshold, evidence) and each detail: the part of a
  // summary.md every kind of verdict shares (the proof's, a plan lab's).
  std::string criteria_markdown() const;
};

struct ProofVerdict {
  Gate gate;
  FirstDivergence divergence;
  std::vector<std::string> notes;  // lines for summary.md
  // drift.json (non-bitwise configurations): the free-running parallel run's per-step difference from the
  // reference and its final eval's (information), and the tolerance the anchored eval is held to; null for
  // bitwise ones.
  nlohmann::json drift;
  std::string title;   // summary.md's heading (prove.json "title")
  nlohmann::json lab;  // the lab the bundle carries (prove.json "lab"), or null
};

// Every criterion of the gate (criteria.h), from the bundle's files alone. An error only when the
// bundle cannot be read at all (no prove.json, an unreadable frozen contract).
Result<ProofVerdict> derive_gate(const std::string& bundle);

// The files a verdict writes next to the sealed ones (evidence::ProofPaths::is_derived): gate.json,
// summary.md (titled by prove.json's "title"), first_divergence.json and, for non-bitwise
// configurations, drift.json; relative name → bytes. `verify DIR` derives them again and requires the
// bundle's copies to be byte-identical (an edited summary.md fails, naming the file).
std::vector<std::pair<std::string, std::string>> derived_files(const ProofVerdict& verdict);

}  // namespace sp::proof
