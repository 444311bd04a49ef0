// The record parsers of a recording (docs/formats/torch_recording.md): contract.json (contract.cc: its
// declarations checked against what the judge can apply), a rank's seal and each line of records/rank-N.jsonl,
// every one strict — exactly its keys, each of its type and range — with errors naming the file (and line) and
// the field. Used by Recording::open (judge/recording.h) only.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "judge/recording.h"
#include "model/weights.h"

namespace sp::judge {

inline constexpr std::string_view kContractName = "contract.json";

// Checks format and version, every field (ranges: what the judge can apply), then the hash (SHA-256 of the
// compact, key-sorted JSON of every other field), and maps the model through the engine's Hugging Face config
// reader. Errors are kInvalidArgument with a hint: the declaration to change, or that the file was edited.
Result<RecordingContract> parse_recording_contract(const nlohmann::json& doc, const std::string& label);
// What is wrong with a strategy's name given its grid (empty: nothing): a name token that says another strategy
// ("fsdp" on a ZeRO-0 recording, "tp" with tp = 1). The recorder applies the same table
// (python/shardproof_torch/declared.py NAME_TOKENS).
std::string strategy_name_problem(const std::string& name, int dp, int tp, int pp, int zero);
// file (relative) → (bytes, SHA-256) of a seal whose "rank" must be `rank`.
Result<std::map<std::string, std::pair<int64_t, std::string>>> parse_seal(const nlohmann::json& doc,
                                                                          const std::string& label, int rank);
// HF name → logical shape of the model's tensors: what a record's shard is checked against (judge/shard.h).
using ShapeMap = std::map<std::string, Shape>;
ShapeMap shape_map(const std::vector<model::WeightSpec>& weights);
// One line of records/rank-N.jsonl into `out` (a step, tensor, save or resume record).
// Format 2 step records may hold "nan"/"inf"/"-inf" for a diverged run's numbers, and group_lr.
// A shard is parsed against its tensor's shape (a box inside it, a fragment within its elements).
Status parse_rank_record(const nlohmann::json& j, const std::string& where, int rank, int64_t line, int version,
                         const ShapeMap& shapes, RankRecords& out);
// An unsigned (or, with allow_sign, "-"-prefixed) lowercase hex integer of at most `limbs` 32-bit limbs into
// little-endian limbs; false if it does not parse or fit.
bool hex_to_limbs(std::string_view hex, size_t limbs, std::vector<uint64_t>& out, bool& negative, bool allow_sign);

}  // namespace sp::judge
