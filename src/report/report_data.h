// The report's data: for a bundle directory, what each view of report.html shows, every value with
// the files it came from (docs/report.md; schema: docs/formats/report_data.md). Not the page
// (render.h) and not a new reader: values come from the evidence and proof readers (compare_checksums,
// check_trace_dir, bubble.h, list/verify_checkpoint, proof::derive_gate) and the bundle's own files,
// every file named by evidence/bundle_paths.h (report.html itself: evidence::kReportFile).
// Invariant: a pure function of the bundle's bytes: no clock, no environment, no absolute path (every
// path is relative to the bundle), no non-finite number (null), so `verify` recomputes it and compares
// it with the copy embedded in report.html.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace sp::report {

inline constexpr int kReportDataVersion = 1;

enum class BundleKind { kRun, kProof, kCompare, kPlan, kJudge };
const char* bundle_kind_name(BundleKind kind);  // "run", "proof", "compare", "plan", "judge"

// proof: DIR/prove.json; compare: DIR/compare.json; plan: DIR/plan.json (`plan --out`); judge: a PyTorch
// recording (contract.json of format shardproof-torch, docs/judge.md) with the judge's gate.json; run:
// DIR/contract.json with the run's evidence (metrics.jsonl, checksums.jsonl, topology.json, ledger.json,
// trace/ or timeline/). Anything else: kInvalidArgument (exit 2) naming what was looked for.
Result<BundleKind> bundle_kind_of(const std::string& dir);

// The data of DIR's report. Fails only when DIR is not a bundle; a missing or unreadable file is a
// problem listed in the data (top level and its view), never an error: the page must say it.
Result<nlohmann::json> report_data(const std::string& dir);

// Every problem the data lists (top level), each naming a file; empty when the report is complete.
std::vector<std::string> report_problems(const nlohmann::json& data);

}  // namespace sp::report
