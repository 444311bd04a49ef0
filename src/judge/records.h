// The record parsers of a recording (docs/formats/torch_recording.md): contract.json, a rank's seal and each
// line of records/rank-N.jsonl, every one strict — exactly its keys, each of its type and range — with errors
// naming the file (and line) and the field. Used by Recording::open (judge/recording.h) only.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "core/status.h"
#include "judge/recording.h"

namespace sp::judge {

inline constexpr std::string_view kContractName = "contract.json";

// Checks format, version and hash (SHA-256 of the compact, key-sorted JSON of every other field), every
// field, and maps the model through the engine's Hugging Face config reader.
Result<RecordingContract> parse_recording_contract(const nlohmann::json& doc, const std::string& label);
// file (relative) → (bytes, SHA-256) of a seal whose "rank" must be `rank`.
Result<std::map<std::string, std::pair<int64_t, std::string>>> parse_seal(const nlohmann::json& doc,
                                                                          const std::string& label, int rank);
// One line of records/rank-N.jsonl into `out` (a step, tensor, save or resume record).
Status parse_rank_record(const nlohmann::json& j, const std::string& where, int rank, int64_t line, RankRecords& out);
// An unsigned (or, with allow_sign, "-"-prefixed) lowercase hex integer of at most `limbs` 32-bit limbs into
// little-endian limbs; false if it does not parse or fit.
bool hex_to_limbs(std::string_view hex, size_t limbs, std::vector<uint64_t>& out, bool& negative, bool allow_sign);

}  // namespace sp::judge
