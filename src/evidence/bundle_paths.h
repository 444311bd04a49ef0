// bundle_paths: the one home of every file name in a run bundle (`train --out`) and a proof bundle
// (`prove --out`), and of each evidence format's version constant (docs/formats/). Nothing else
// spells an evidence file name: the lower layers that write a file of their own keep its name next to
// its writer (trace/ and topology.json in comm/, checkpoints/ in ckpt/names.h), and these classes ask them.
// No I/O here beyond listing a directory (list_rank_files). Invariant: every path is `root` joined with a fixed
// relative name, and the relative names (kContractFile, ...) are what evidence pointers in gate.json and summary.md
// print.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/format.h"
#include "ckpt/names.h"
#include "comm/topology.h"
#include "comm/trace_record.h"
#include "core/status.h"

namespace sp::evidence {

// Format versions (each file's "format_version"); the format documents say what each version holds.
inline constexpr int kContractFormatVersion = 1;       // docs/formats/contract.md
inline constexpr int kCommPredictedFormatVersion = 2;  // docs/formats/comm_predicted.md (2: per step class)
inline constexpr int kLedgerFormatVersion = 1;         // docs/formats/ledger.md
inline constexpr int kProveFormatVersion = 2;          // docs/formats/gate.md (prove.json; 2: anchors)
inline constexpr int kGateFormatVersion = 1;           // docs/prove.md (gate.json)
inline constexpr int kStrategyTableFormatVersion = 1;  // docs/compare.md (compare.json)
inline constexpr int kAnchorsFormatVersion = 1;        // docs/formats/anchors.md

// Names relative to a run bundle's root.
inline constexpr std::string_view kContractFile = "contract.json";
inline constexpr std::string_view kCommPredictedFile = "comm_predicted.json";
inline constexpr std::string_view kChecksumsFile = "checksums.jsonl";
inline constexpr std::string_view kMetricsFile = "metrics.jsonl";
inline constexpr std::string_view kLedgerFile = "ledger.json";
inline constexpr std::string_view kTimelineDir = "timeline";
inline constexpr std::string_view kActivationsDir = "activations";
inline constexpr std::string_view kAnchorsFile = "anchors.json";  // an anchored replay's anchors
// Named by the layers that write them; repeated here so that one header reaches every name.
inline constexpr std::string_view kTopologyFile = comm::kTopologyFileName;
inline constexpr std::string_view kTraceDir = comm::kTraceDirName;
inline constexpr std::string_view kCheckpointsDir = ckpt::kCheckpointsDir;
inline constexpr std::string_view kSegmentsDir = ckpt::kSegmentsDir;

// "rank-00003.jsonl": a per-rank file inside trace/, timeline/ or activations/; and its parser.
std::string rank_file_name(int world_rank);
std::optional<int> parse_rank_file_name(std::string_view name);
// The rank files of a directory (trace/, timeline/, activations/), sorted by rank; other entries are
// returned in `ignored` (full paths). A missing directory is an error naming it.
struct RankFile {
  int rank = 0;
  std::string path;
};
Result<std::vector<RankFile>> list_rank_files(const std::string& dir, std::vector<std::string>* ignored = nullptr);

class RunPaths {
 public:
  explicit RunPaths(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  std::string file(std::string_view relative) const;  // ROOT/relative
  std::string contract() const { return file(kContractFile); }
  std::string topology() const;
  std::string comm_predicted() const { return file(kCommPredictedFile); }
  std::string checksums() const { return file(kChecksumsFile); }
  std::string metrics() const { return file(kMetricsFile); }
  std::string ledger() const { return file(kLedgerFile); }
  std::string anchors() const { return file(kAnchorsFile); }
  std::string trace_dir() const;
  std::string trace(int world_rank) const;
  std::string timeline_dir() const { return file(kTimelineDir); }
  std::string timeline(int world_rank) const;
  std::string activations_dir() const { return file(kActivationsDir); }
  std::string activations(int world_rank) const;
  ckpt::CheckpointPaths checkpoints() const { return ckpt::CheckpointPaths(root_); }

 private:
  std::string root_;
};

// A proof bundle: the protocol's own files and one run bundle per stage (docs/prove.md).
inline constexpr std::string_view kReferenceStage = "reference", kParallelStage = "parallel", kFaultStage = "fault",
                                  kRecoveryStage = "recovery";
inline constexpr std::array<std::string_view, 4> kStageNames = {kReferenceStage, kParallelStage, kFaultStage,
                                                                kRecoveryStage};
// The anchored replays of a configuration whose promise is not bitwise (docs/equivalence.md §anchored).
inline constexpr std::string_view kAnchoredStage = "anchored", kFaultAnchoredStage = "fault-anchored";
inline constexpr std::string_view kDriftFile = "drift.json";  // derived: the free-running trajectories' drift
inline constexpr std::string_view kProveFile = "prove.json";
inline constexpr std::string_view kFirstDivergenceFile = "first_divergence.json";
inline constexpr std::string_view kGateFile = "gate.json";
inline constexpr std::string_view kSummaryFile = "summary.md";
inline constexpr std::string_view kSealFile = "bundle.sha256";
inline constexpr std::string_view kSignatureFile = "bundle.sig";  // optional: Ed25519 over bundle.sha256
inline constexpr std::string_view kLogsDir = "logs";
// Derived from the sealed files like summary.md (docs/report.md); written by prove, compare and lab run.
inline constexpr std::string_view kReportFile = "report.html";
// A compare directory (`compare --out`, docs/compare.md): the table as JSON and as Markdown.
inline constexpr std::string_view kCompareFile = "compare.json";
inline constexpr std::string_view kCompareSummaryFile = "compare.md";
// A plan directory (`plan --out`, docs/plan.md §8): the planner's JSON document.
inline constexpr std::string_view kPlanFile = "plan.json";
// A judge lab's directory (`lab run`, docs/labs.md §LSL-P): the lab, as a proof lab's prove.json carries it.
inline constexpr std::string_view kLabFile = "lab.json";

// A path inside a bundle as a lab claim names it ("parallel/trace/rank-*.jsonl", "fault/gate.json",
// "dgx-a100-tp-dp-pp/plan.json"; '*' for any run of characters): its file name must be one this header names —
// a file of a run, proof, compare, plan or judge lab directory, a rank file of trace/, timeline/ or activations/,
// a checkpoint's manifest, a stage's log. kInvalidArgument naming it and the names there are, otherwise.
Status check_bundle_name(std::string_view relative);

// "fault/checksums.jsonl": a file of a stage as evidence pointers in gate.json and summary.md name it;
// a directory gets a trailing '/'.
std::string stage_file(std::string_view stage, std::string_view name);
std::string stage_dir(std::string_view stage, std::string_view name);

class ProofPaths {
 public:
  explicit ProofPaths(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  std::string file(std::string_view relative) const;
  std::string prove() const { return file(kProveFile); }
  std::string contract() const { return file(kContractFile); }  // the frozen contract (stage 1)
  std::string first_divergence() const { return file(kFirstDivergenceFile); }
  std::string gate() const { return file(kGateFile); }
  std::string summary() const { return file(kSummaryFile); }
  std::string seal() const { return file(kSealFile); }
  std::string signature() const { return file(kSignatureFile); }
  std::string logs_dir() const { return file(kLogsDir); }
  static std::string log_file(std::string_view stage);  // "logs/<stage>.log", relative
  std::string log(std::string_view stage) const { return file(log_file(stage)); }
  RunPaths stage(std::string_view name) const { return RunPaths(file(name)); }
  RunPaths reference() const { return stage(kReferenceStage); }
  RunPaths parallel() const { return stage(kParallelStage); }
  RunPaths fault() const { return stage(kFaultStage); }
  RunPaths recovery() const { return stage(kRecoveryStage); }
  RunPaths anchored() const { return stage(kAnchoredStage); }
  RunPaths fault_anchored() const { return stage(kFaultAnchoredStage); }
  std::string drift() const { return file(kDriftFile); }
  // Files derived from the sealed ones after sealing (`verify` derives them again): not in the seal.
  static bool is_derived(std::string_view relative);

 private:
  std::string root_;
};

}  // namespace sp::evidence
