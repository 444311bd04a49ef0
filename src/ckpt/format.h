// Checkpoint format constants: the one place the on-disk literals of docs/formats/checkpoint.md live.
// Not a reader or a writer (manifest.h, shard.h) and not a path builder (names.h uses these).
// Invariant: a change to any value here is a format change: bump kFormatVersion and the document;
// the static_asserts pin what other modules rely on (name widths, suffixes, kind order).
// Reference: docs/formats/checkpoint.md.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace sp::ckpt {

inline constexpr int kFormatVersion = 3;        // 2: per-chunk SHA-256 of every shard in the manifest;
                                                // 3: shards record the training state the manifest records (kMetaState)
inline constexpr int kOldestFormatVersion = 2;  // still read (without the state cross-check)
inline constexpr std::string_view kManifestFormat = "shardproof-checkpoint";
inline constexpr std::string_view kLatestFormat = "shardproof-checkpoint-latest";
inline constexpr std::string_view kShardFormat = "shardproof-checkpoint-shard";

// RUN/checkpoints/{LATEST, step-NNNNNN/{manifest.json, rank-NNNNN.safetensors}}
inline constexpr std::string_view kCheckpointsDir = "checkpoints";
inline constexpr std::string_view kLatestFile = "LATEST";
inline constexpr std::string_view kManifestFile = "manifest.json";
inline constexpr std::string_view kStepPrefix = "step-";
inline constexpr int kStepDigits = 6;  // minimum width; longer step numbers are written in full
inline constexpr std::string_view kShardPrefix = "rank-";
inline constexpr int kRankDigits = 5;
inline constexpr std::string_view kShardSuffix = ".safetensors";
inline constexpr std::string_view kPartialSuffix = ".partial";    // being written; removed by the next save
inline constexpr std::string_view kDeletingSuffix = ".deleting";  // being removed by retention
inline constexpr std::string_view kRefusedSuffix = ".refused";    // set aside by --fallback-previous; kept

// Keys of a shard's safetensors "__metadata__" (all values are strings, as safetensors requires).
inline constexpr std::string_view kMetaFormat = "format";           // kShardFormat
inline constexpr std::string_view kMetaVersion = "format_version";  // "2"
inline constexpr std::string_view kMetaRank = "rank";               // world rank that wrote the shard
inline constexpr std::string_view kMetaCoords = "coords";           // "dp0.tp1.pp0"
inline constexpr std::string_view kMetaStep = "step";
inline constexpr std::string_view kMetaFragments = "fragments";  // JSON array, one entry per stored tensor
// JSON {"optimizer_steps", "loader_cursor"}: the manifest's copy must equal it (version 3), so an edited
// manifest cannot silently change the state a resume restores (the shard is covered by its SHA-256).
inline constexpr std::string_view kMetaState = "state";

// What a stored tensor holds. The order is the order of the data in a shard file.
enum class StateKind : uint8_t { kParam = 0, kExpAvg = 1, kExpAvgSq = 2 };
inline constexpr std::array<StateKind, 3> kStateKinds = {StateKind::kParam, StateKind::kExpAvg, StateKind::kExpAvgSq};
inline constexpr std::array<std::string_view, 3> kStateKindNames = {"param", "exp_avg", "exp_avg_sq"};
inline constexpr std::string_view state_kind_name(StateKind k) { return kStateKindNames[static_cast<size_t>(k)]; }

// A shard's SHA-256 is also recorded per consecutive chunk of this many bytes (the last may be
// shorter), so that a load verifies a shard on several cores (SHA-256 itself is sequential).
inline constexpr uint64_t kShaChunkBytes = uint64_t{32} << 20;

// Bounds on untrusted input (a damaged or hostile file is refused before it can size an allocation).
inline constexpr uint64_t kMaxManifestBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxLatestBytes = 4096;
inline constexpr int64_t kMaxStep = 999'999'999'999;  // 12 digits
inline constexpr int kMaxWorld = 1 << 20;
inline constexpr int kMaxJsonDepth = 64;  // manifest, LATEST and fragment metadata nesting

static_assert(kFormatVersion == 3, "a format change bumps the version and docs/formats/checkpoint.md");
static_assert(kStepDigits >= 6 && kRankDigits >= 5, "names sort lexicographically up to 10^6 steps / 10^5 ranks");
static_assert(kShardSuffix == ".safetensors", "shards are plain safetensors files");
static_assert(kStateKindNames.size() == kStateKinds.size());
static_assert(state_kind_name(StateKind::kExpAvgSq) == "exp_avg_sq");
static_assert(kMaxWorld >= 1 && kMaxStep > 0);

}  // namespace sp::ckpt
